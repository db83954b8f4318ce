"""Whether a run can start and whether it did its job: the checks before anything runs, too
many errored items (`--max-errors`) or no model answering any call (exit code 3 either way),
the lines that say what its errors were, and the rate gate (`--fail-under`), which fails
closed: a missing or null rate fails it, and so does one that left out, or counted errored,
more items than `--max-errors` allows (none by default: a gate checks every item judged)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runner.engine.rates import PassRule, as_given, exact, rate_entries, rate_text, unclean
from runner.errors import InputError
from runner.pipeline.model import Pipeline

if TYPE_CHECKING:
    from runner.engine.context import Runtime

TOO_MANY_ERRORS = 3        # exit code: every item errored, more than --max-errors did, or no model answered
SHOWN_GROUPS = 3


def check_before_run(pipeline: Pipeline, fail_under: float | None) -> None:
    """`--fail-under` needs a rate to check: say so before any item runs, not after."""
    if fail_under is not None and PassRule.first_rate(pipeline.summary) is None:
        raise InputError(f"--fail-under {fail_under}: pipeline '{pipeline.name}' has no summary.rates to check "
                         "(add one, e.g. summary: {rates: {pass_rate: \"result.verdict == 'PASS'\"}}); nothing run")


@dataclass(frozen=True)
class ItemEnd:
    """How a finished item ended, by the one rule of every way items run (item_end)."""

    error: str | None           # why it counts as failed; None: it did not fail
    cached: bool = False        # every LLM answer it got came from the cache (and it got one)
    answered: bool = False      # a model (or the cache) gave it a usable answer


def item_end(runtime: Runtime, position: int, result: dict[str, Any], keep: bool = False) -> ItemEnd:
    """The one rule for whether a finished item failed (a run's error count, `runner serve`): its
    result has an `error` (`error: true` says its `error_message`), or its
    LLM work got no usable answer (a failed call `on_error` let pass, a jury with no valid vote:
    runner/llm/tally.py). Its LLM tally is then forgotten unless `keep`."""
    failed, reason, cached, answered = runtime.llm.settle(position, keep) if runtime.llm_used else (
        False, "", False, False)
    message = result.get("error")
    if message is True:         # its text beside it (the slides seed's error_message)
        said = result.get("error_message")
        message = said if isinstance(said, str) and said else nested_error(result) or reason or "error: true"
    if not message and failed:      # what the result shows first (a jury's votes in seat order), else the tally's
        message = nested_error(result) or reason or "no usable answer from any model"
    return ItemEnd(str(message) if message else None, cached and not message, answered)


def nested_error(value: Any) -> str | None:
    """The first `error` text inside a result (a juror's vote, a step's result)."""
    if isinstance(value, dict) and isinstance(value.get("error"), str) and value["error"]:
        return str(value["error"])
    inner: Iterable[Any] = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return next(filter(None, map(nested_error, inner)), None)


def unanswered_calls(summary: dict[str, Any]) -> int:
    """The calls that failed in a run no model answered, else 0: such a run did not do its job
    even when some items needed no model. The cache answers, and so does a reused result a
    model's answer made (`reused_answered`: the memo, serve's store, a --failed-from parent)."""
    models = [m for m in (summary.get("models") or {}).values() if isinstance(m, dict)]
    failed = sum(int(m.get("failures") or 0) for m in models)
    answered = sum(int(m.get("answered") or 0) + int(m.get("cache_hits") or 0) for m in models)
    answered += int(summary.get("reused_answered") or 0)
    return failed if failed and not answered else 0


def error_lines(summary: dict[str, Any]) -> list[str]:
    """`13/13 items: model 'local' ... (connection refused)`, the top few kinds of error."""
    total = summary.get("total") or 0
    groups = summary.get("error_groups") or []
    lines = [f"{g['count']}/{total} items: {g['error']}" for g in groups[:SHOWN_GROUPS]]
    rest = sum(g["count"] for g in groups[SHOWN_GROUPS:]) + max(
        0, int(summary.get("errors") or 0) - sum(g["count"] for g in groups))
    if rest:
        lines.append(f"{rest} more item(s) with other errors (summary.json: error_groups, results.jsonl: error)")
    return lines


@dataclass(frozen=True)
class MaxErrors:
    """--max-errors: a count (`5`), a fraction (`0.2`, `20%`) or None (every item)."""

    count: int | None = None
    fraction: float | None = None

    @classmethod
    def parse(cls, text: str | None) -> MaxErrors:
        value = (text or "").strip()
        if value in ("", "all"):
            return cls()
        with contextlib.suppress(ValueError):
            if value.isdigit():
                return cls(count=int(value))
            fraction = float(value[:-1]) / 100 if value.endswith("%") else float(value)
            if 0 <= fraction <= 1:
                return cls(fraction=fraction)
        raise InputError(f"--max-errors {text}: give a count (5), a fraction (0.2) or a percentage (20%)")

    def exceeded(self, errors: int, total: int) -> bool:
        if total == 0 or errors == 0:
            return False
        if self.count is not None:
            return errors > self.count
        if self.fraction is not None:
            return errors / total > self.fraction
        return errors >= total

    def describe(self) -> str:
        if self.count is not None:
            return f"more than {self.count} item(s) errored (--max-errors {self.count})"
        if self.fraction is not None:
            return f"more than {self.fraction:.0%} of the items errored (--max-errors {self.fraction:g})"
        return "every item errored"

    def describe_left_out(self, given: bool) -> str:
        """What a rate gate allows to be left out of its rate."""
        if not given:
            return "a rate gate allows none unless --max-errors says how many"
        if self.count is not None:
            return f"--max-errors {self.count} allows {self.count}"
        if self.fraction is not None:
            return f"--max-errors {self.fraction:g} allows {self.fraction:.0%} of the items"
        return "--max-errors all allows every item but the last"


def run_failure(summary: dict[str, Any], allowed: MaxErrors | None = None) -> str | None:
    """Why a run failed (exit code TOO_MANY_ERRORS: no model answered any call, more items
    errored than `allowed` (by default every item), or the selection kept no item of an input
    that has some), or None: for run, eval and sweep alike."""
    errors, total, allowed = int(summary.get("errors") or 0), int(summary.get("total") or 0), allowed or MaxErrors()
    inputs = int(summary.get("input_items") or 0)
    if not total and inputs and not summary.get("interrupted"):
        return (f"run failed: the selection (--item, --filter, --limit) kept none of the input's {inputs} item(s), "
                f"so nothing was judged (exit code {TOO_MANY_ERRORS})")
    if failed_calls := unanswered_calls(summary):
        return f"run failed: no model answered any call ({failed_calls} call(s) failed; exit code {TOO_MANY_ERRORS})"
    if allowed.exceeded(errors, total):
        return f"run failed: {allowed.describe()} ({errors} of {total}; exit code {TOO_MANY_ERRORS})"
    return None


def gate_allowance(max_errors: str | None) -> MaxErrors:
    """How many items a rate gate lets its rate leave out: --max-errors, else none."""
    return MaxErrors.parse(max_errors) if max_errors is not None else MaxErrors(count=0)


def rate_gate(summary: dict[str, Any], name: str, threshold: float, allowed: MaxErrors,
              given: bool = True) -> tuple[bool, str]:
    """(passed, the line that says why) of `--fail-under threshold` on the rate `name`."""
    entry = rate_entries(summary).get(name)
    gate = f"--fail-under {threshold:g}"
    if entry is None:
        return False, f"{name} is missing from summary.json: {gate} has nothing to check (run failed closed)"
    if entry.get("value") is None:
        return False, f"{name} is n/a ({entry.get('reason') or 'not computed'}): {gate} has nothing to check"
    shown = f"{name} {rate_text(entry)}"
    not_clean, total = unclean(entry), int(summary.get("total") or 0)
    if not_clean and allowed.exceeded(not_clean, total):
        what = " or ".join(part for part, n in (("left out of it", entry.get("left_out")),
                                                ("errored", entry.get("errored_counted"))) if n)
        return False, (f"{shown}: {not_clean} of {total} item(s) {what}, more than the gate allows "
                       f"({allowed.describe_left_out(given)}); {gate} not met")
    if exact(entry) < as_given(threshold):
        return False, f"{shown} is below {gate} (rates run 0-1)"
    return True, f"{shown} meets {gate}"
