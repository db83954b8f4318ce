"""summary.json: counts by a field, total, rates, named fields and assessment rules."""

from __future__ import annotations

from collections import Counter
from typing import Any

from runner.engine.context import Runtime, condition_at, render_at
from runner.engine.run_warnings import run_warnings
from runner.errors import TemplateError
from runner.outputs.health import error_groups


def summarize(runtime: Runtime, results: list[dict[str, Any]], interrupted: bool = False) -> dict[str, Any]:
    spec = runtime.pipeline.summary
    field = spec.get("count_by")
    counts: dict[str, int] = {}
    if field:
        counts = dict(Counter(_count_key(r, field) for r in results))
    total = len(results)
    # An error: an item with `error`, or one whose LLM work got no usable answer (runner/llm/tally.py).
    failed = runtime.llm.failed_items() if runtime.llm_used else set()
    errors = sum(1 for r in results if r.get("error") or r.get("index") in failed)
    scope: dict[str, Any] = {"params": runtime.params, "env": runtime.env, "run": runtime.run_info,
                             "results": results, "counts": counts, "total": total, "errors": errors}
    summary: dict[str, Any] = {"pipeline": runtime.pipeline.name, "total": total, "errors": errors}
    if errors:
        summary["error_groups"] = error_groups(results, runtime.llm.failure_reasons() if runtime.llm_used else {})
    if field:
        summary["count_by"] = field
        summary["counts"] = counts
    problems: list[str] = []     # a broken summary expression must not lose the results
    for name, expression in (spec.get("rates") or {}).items():
        try:
            hits = sum(1 for r in results
                       if condition_at(runtime, expression, ("summary", "rates", name), {**scope, "result": r}))
        except TemplateError as exc:
            problems.append(str(exc))
            continue
        summary[name] = round(hits / total, 4) if total else 0.0
        summary[f"{name}_count"] = hits
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
