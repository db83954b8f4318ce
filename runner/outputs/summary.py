"""summary.json: counts by a field, total, rates, named fields and assessment rules."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from runner.engine.context import Runtime, condition_at, render_at
from runner.engine.run_warnings import run_warnings
from runner.errors import TemplateError
from runner.outputs.health import KEPT_GROUPS, error_groups, nested_error

MAX_GROUPS = 1000                   # distinct error messages counted apart; the rest are counted together
OTHER_ERRORS = "(other errors)"


class ErrorCount:
    """The run's errors, kept as results arrive: an item with `error`, or one whose LLM work got
    no usable answer (runner/llm/tally.py; the tally forgets an item once it is counted),
    counted, and grouped by message (what the run's error lines and `error_groups` show)."""

    def __init__(self, runtime: Runtime):
        self.runtime = runtime
        self.count = 0
        self.groups: Counter[str] = Counter()

    def add(self, result: dict[str, Any]) -> None:
        failed, reason = self.runtime.llm.settle(result.get("index")) if self.runtime.llm_used else (False, "")
        message = result.get("error")
        if not message and failed:
            message = reason or nested_error(result) or "no usable answer from any model"
        if message:
            self.count += 1
            self._group(" ".join(str(message).split()))

    def add_all(self, messages: Counter[str]) -> None:
        """Errors of results taken in from elsewhere (a --failed-from rerun's parent)."""
        self.count += sum(messages.values())
        for message, n in messages.items():
            self._group(message, n)

    def _group(self, message: str, n: int = 1) -> None:
        if message in self.groups or len(self.groups) < MAX_GROUPS:
            self.groups[message] += n
        else:
            self.groups[OTHER_ERRORS] += n       # a run of a million distinct messages keeps a bounded table

    def top(self) -> list[dict[str, Any]]:
        return [{"count": n, "error": text} for text, n in self.groups.most_common(KEPT_GROUPS)]


def summarize(runtime: Runtime, results: Iterable[dict[str, Any]], interrupted: bool = False,
              errors: ErrorCount | None = None) -> dict[str, Any]:
    """summary.json from one pass over `results` (a list, or a view over results.jsonl that
    `summary.fields` expressions see as `results`); `errors` as counted during the run, when
    it was (else counted here)."""
    spec = runtime.pipeline.summary
    field = spec.get("count_by")
    base = {"params": runtime.params, "env": runtime.env, "run": runtime.run_info}
    failed = runtime.llm.failed_items() if runtime.llm_used and errors is None else set()
    rates = dict(spec.get("rates") or {})
    hits = dict.fromkeys(rates, 0)
    broken: dict[str, str] = {}
    counter: Counter[str] = Counter()
    total = counted_errors = 0
    for result in results:
        total += 1
        if field:
            counter[_count_key(result, field)] += 1
        if errors is None and (result.get("error") or result.get("index") in failed):
            counted_errors += 1
        for name, expression in rates.items():
            if name in broken:
                continue
            try:
                if condition_at(runtime, expression, ("summary", "rates", name), {**base, "result": result}):
                    hits[name] += 1
            except TemplateError as exc:
                broken[name] = str(exc)
    error_count = counted_errors if errors is None else errors.count
    counts = dict(counter)
    scope: dict[str, Any] = {**base, "results": results, "counts": counts, "total": total, "errors": error_count}
    summary: dict[str, Any] = {"pipeline": runtime.pipeline.name, "total": total, "errors": error_count}
    if error_count:
        summary["error_groups"] = errors.top() if errors is not None else \
            error_groups(results, runtime.llm.failure_reasons() if runtime.llm_used else {})
    if field:
        summary["count_by"] = field
        summary["counts"] = counts
    problems: list[str] = []     # a broken summary expression must not lose the results
    for name in rates:
        if name in broken:
            problems.append(broken[name])
            continue
        summary[name] = round(hits[name] / total, 4) if total else 0.0
        summary[f"{name}_count"] = hits[name]
    for name, expression in (spec.get("fields") or {}).items():
        try:
            summary[name] = render_at(runtime, expression, ("summary", "fields", name), {**scope, **summary})
        except TemplateError as exc:
            problems.append(str(exc))
    for number, rule in enumerate(spec.get("assessment") or []):
        where = ("summary", "assessment", number)
        try:
            if "when" not in rule or condition_at(runtime, rule["when"], (*where, "when"), {**scope, **summary}):
                summary[spec.get("assessment_key", "assessment")] = render_at(
                    runtime, rule["text"], (*where, "text"), {**scope, **summary})
                break
        except TemplateError as exc:
            problems.append(str(exc))
            break
    if problems:
        summary["summary_errors"] = problems
    warnings = run_warnings(runtime)
    if warnings:
        summary["run_warnings"] = warnings
    if interrupted:
        summary["interrupted"] = True
    return summary


def _count_key(result: dict[str, Any], field: str) -> str:
    value = result.get(field)
    return "ERROR" if value is None and result.get("error") else str(value)
