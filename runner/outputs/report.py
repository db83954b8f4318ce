"""report.md: the summary, then one row per item."""

from __future__ import annotations

from typing import Any

SKIP = {"index", "warnings"}


def _cell(value: Any) -> str:
    if isinstance(value, float):
        text = f"{value:.3g}"
    elif isinstance(value, (dict, list)):
        text = "…" if value else ""
    else:
        text = "" if value is None else str(value)
    text = " ".join(text.split())
    if len(text) > 160:
        text = text[:157] + "..."
    return text.replace("|", "\\|")


def lookup(result: dict[str, Any], column: str) -> Any:
    """A result field; `a.b` reads inside nested objects."""
    value: Any = result
    for part in column.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def columns_for(results: list[dict[str, Any]], configured: list[str] | None) -> list[str]:
    if configured:
        return ["index", *[c for c in configured if c != "index"]]
    seen: list[str] = ["index"]
    for result in results:
        for key, value in result.items():
            if key not in seen and key not in SKIP and not isinstance(value, (dict, list)):
                seen.append(key)
    if any("error" in r for r in results) and "error" not in seen:
        seen.append("error")
    return seen


def render_report(summary: dict[str, Any], results: list[dict[str, Any]],
                  columns: list[str] | None = None, assessment_key: str = "assessment") -> str:
    lines = [f"# {summary.get('pipeline', 'run')}: report", ""]
    assessment = summary.get(assessment_key)
    if assessment:
        lines += [f"**Assessment:** {assessment}", ""]
    for hint in summary.get("hints", []):
        lines += [f"> {hint}", ""]
    lines += ["## Summary", "", "| measure | value |", "|---|---|"]
    for key, value in summary.items():
        if key in ("pipeline", assessment_key, "counts", "count_by", "models", "juries", "hints"):
            continue
        lines.append(f"| {key} | {_cell(value)} |")
    if summary.get("counts"):
        lines += ["", f"### Counts by {summary.get('count_by')}", "", "| value | count |", "|---|---|"]
        lines += [f"| {_cell(k)} | {v} |" for k, v in sorted(summary["counts"].items(), key=lambda kv: -kv[1])]
    for name, stats in (summary.get("models") or {}).items():
        if name == list(summary["models"])[0]:
            lines += ["", "### Models", "", "| model | calls | cached | failed | tokens | cost |",
                      "|---|---|---|---|---|---|"]
        lines.append(f"| {name} | {stats.get('calls', 0)} | {stats.get('cache_hits', 0)} | {stats.get('failures', 0)} "
                     f"| {stats.get('total_tokens', 0)} | {_cell(stats.get('cost', 0.0))} |")
    cols = columns_for(results, columns)
    lines += ["", "## Items", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for result in results:
        lines.append("| " + " | ".join(_cell(lookup(result, c)) for c in cols) + " |")
    return "\n".join(lines) + "\n"
