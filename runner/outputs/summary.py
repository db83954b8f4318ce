"""summary.json: counts by a field, total, rates, named fields and assessment rules."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from runner.engine.context import Runtime, condition_at, render_at
from runner.engine.run_warnings import run_warnings
from runner.errors import TemplateError


class ErrorCount:
    """The run's error count, kept as results arrive: an item with `error`, or one whose LLM work
    got no usable answer (runner/llm/tally.py; the tally forgets an item once it is counted)."""

    def __init__(self, runtime: Runtime):
        self.runtime = runtime
        self.count = 0

    def add(self, result: dict[str, Any]) -> None:
        failed = self.runtime.llm.settle(result.get("index")) if self.runtime.llm_used else False
        if result.get("error") or failed:
            self.count += 1


def summarize(runtime: Runtime, results: Iterable[dict[str, Any]], interrupted: bool = False,
              errors: int | None = None) -> dict[str, Any]:
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
    errors = counted_errors if errors is None else errors
    counts = dict(counter)
    scope: dict[str, Any] = {**base, "results": results, "counts": counts, "total": total, "errors": errors}
    summary: dict[str, Any] = {"pipeline": runtime.pipeline.name, "total": total, "errors": errors}
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
