"""What the CLI's command modules share. Where an error becomes an exit code, for every command
of every command group: a RunnerError its message and code, an interruption its own, and a
command's own outcome (a failed gate, too many errored items) the code it gives `fail`. The
options used by several commands, and what they print of a run."""

from __future__ import annotations

import copy
import functools
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from typer.main import get_command_name
from typer.models import CommandFunctionType

from runner.errors import RunnerError
from runner.redact import redact


def fail(message: str, code: int = 2) -> NoReturn:
    """End the command: `message` on stderr, exit `code`."""
    typer.echo(message, err=True)
    raise typer.Exit(code)


LARGEST_WHOLE = sys.maxsize      # what a count can be where it reaches the system (islice, a slice)


def _check_numbers(options: dict[str, Any]) -> None:
    """A number option typer read that no command can use: NaN or infinity (every comparison
    with NaN is false, so `--fail-under nan` met any rate), or a whole number past what Python
    counts with (a traceback where it reaches the system: islice, a timedelta)."""
    for name, value in options.items():
        flag = "--" + name.rstrip("_").replace("_", "-")
        if isinstance(value, float) and not math.isfinite(value):
            fail(f"{flag} {value}: not a number runner can use (give a finite number)")
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > LARGEST_WHOLE:
            fail(f"{flag} {value}: larger than runner takes ({LARGEST_WHOLE:,} at most)")


class RunnerApp(typer.Typer):
    """A typer app (or command group) whose every command turns a RunnerError into its message
    on stderr and its exit code (2), and an interruption into its own (Ctrl-C 130, SIGTERM 143)
    with what it left behind: `interrupted=`."""

    def command(self, name: str | None = None, *, interrupted: str = "finished items are written",
                **kwargs: Any) -> Callable[[CommandFunctionType], CommandFunctionType]:
        register = super().command(name, **kwargs)

        def decorator(function: CommandFunctionType) -> CommandFunctionType:
            @functools.wraps(function)
            def guarded(*args: Any, **kwargs: Any) -> Any:
                _check_numbers(kwargs)
                try:
                    return function(*args, **kwargs)
                except RunnerError as exc:
                    fail(redact(str(exc)), exc.exit_code)
                except KeyboardInterrupt as stop:
                    fail(f"interrupted: {interrupted}", getattr(stop, "exit_code", 130))
            register(guarded)
            return function
        return decorator

    def narrowed_to(self, args: Sequence[str]) -> typer.Typer:
        """This app holding only the command (or command group) `args` starts with. Typer
        builds every command's parameters from their signatures at each start, and an
        invocation needs one. Anything else (no command, an option such as
        --help or --version, a name it does not know) gets the whole app, so help, the
        version and "No such command" read as before."""
        if not args or args[0].startswith("-"):
            return self
        commands = [info for info in self.registered_commands
                    if (info.name or (info.callback and get_command_name(info.callback.__name__))) == args[0]]
        groups = [info for info in self.registered_groups if info.name == args[0]]
        if not commands and not groups:
            return self
        narrowed = copy.copy(self)
        narrowed.registered_commands, narrowed.registered_groups = commands, groups
        return narrowed


PipelineArg = Annotated[Path, typer.Argument(help="Pipeline file.")]
InputOpt = Annotated[Path | None, typer.Option(
    "--input", "-i", help="Input file (adapter set by the pipeline); - reads standard input.")]
InputFormatOpt = Annotated[str | None, typer.Option(
    "--input-format", help="Read --input with this input adapter instead of the pipeline's (e.g. csv or jsonl "
                           "for --input -); the pipeline's input.with options apply only to its own adapter.")]
RecordOpt = Annotated[list[str] | None, typer.Option("--record", help="KEY=VALUE of one ad-hoc item (repeat).")]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="Override any pipeline key: a.b.c=VALUE (YAML).")]
ModelOpt = Annotated[list[str] | None, typer.Option(
    "--model", help="Judge with this model: NAME=provider/model[@api_base] points the pipeline's model NAME "
                    "there and seats it, e.g. judge=openai/gpt-4o-mini (repeat for more).")]
CacheDirOpt = Annotated[Path | None, typer.Option("--cache-dir",
                                                  help="LLM cache folder (default cache/ or $RUNNER_CACHE_DIR).")]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Do not read the cache (still writes).")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")]
PortOpt = Annotated[int, typer.Option("--port", help="Port to serve on.", min=1, max=65535)]


def cache_dir_of(value: Path | None) -> Path:
    return value or Path(os.environ.get("RUNNER_CACHE_DIR", "cache"))


def overrides_of(sets: list[str] | None, models: list[str] | None) -> list[str]:
    """--set assignments, then each --model as the loader's `--model NAME=...` text."""
    from runner.pipeline.overrides import MODEL_FLAG
    return [*(sets or []), *(MODEL_FLAG + text for text in models or [])]


def echo_run_notes(summary: dict[str, Any]) -> None:
    """A run's hints, warnings, summary expressions that could not be computed (summary.json's
    summary_errors) and error lines, on stderr."""
    from runner.engine.health import error_lines
    for note in [*summary.get("hints", []), *(f"warning: {w}" for w in summary.get("run_warnings", [])),
                 *(f"summary: {problem}" for problem in summary.get("summary_errors", [])),
                 *error_lines(summary)]:
        typer.echo(note, err=True)
