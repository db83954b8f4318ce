"""User-facing errors. Everything a user can fix is a RunnerError; the CLI prints
its message and exits 2. Anything else is a bug and may show a traceback."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


class RunnerError(Exception):
    """An error the user can act on: bad configuration, input or usage."""

    exit_code = 2


@dataclass(frozen=True)
class Problem:
    """One located problem: `file:line:col: path: message` (or `--set K=V: path: message`)."""

    where: str
    path: str
    message: str
    order: tuple[int, int] = (0, 0)

    def __str__(self) -> str:
        return f"{self.where}: {self.path}: {self.message}" if self.path else f"{self.where}: {self.message}"


class ConfigError(RunnerError):
    """One or more problems in a pipeline file, reported together."""

    def __init__(self, problems: list[Problem]):
        self.problems = sorted(set(problems), key=lambda p: (p.order, p.where, p.message))
        super().__init__("\n".join(str(p) for p in self.problems))


class InputError(RunnerError):
    """The --input file or --record values cannot be turned into items."""


class StepError(Exception):
    """A step failed for this item; `partial`: what it still knows (a raw answer), which `on_error: continue` yields."""

    def __init__(self, message: str, partial: dict[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.partial = partial


class Terminated(KeyboardInterrupt):
    """SIGTERM ended the command; handled like Ctrl-C (a run writes what finished), exit 143."""

    exit_code = 143


class NeedsModel(Exception):
    """`runner render` reached an LLM answer that is not cached."""


class TemplateError(RunnerError):
    """A template failed at run time: names the file, field and cause."""


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """A ' Did you mean 'x'?' suffix, or '' when nothing is close."""
    close = difflib.get_close_matches(name, sorted(set(choices)), n=1, cutoff=0.6)
    return f" Did you mean '{close[0]}'?" if close else ""


def unknown(kind: str, name: str, choices: Iterable[str], known_label: str = "known") -> str:
    """`unknown model 'x'. Did you mean 'y'?`, or the list of valid names when none is close."""
    options = sorted(set(choices))
    if hint := did_you_mean(name, options):
        return f"unknown {kind} '{name}'.{hint}"
    return f"unknown {kind} '{name}' ({known_label}: {', '.join(options) or 'none'})"
