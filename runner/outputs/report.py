"""report.md and report.html: the summary, then one row per item.

Both come from one neutral layout (notes, then tables), so they never disagree."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

SKIP = {"index", "warnings"}
SUMMARY_SECTIONS = ("pipeline", "counts", "count_by", "models", "juries", "hints")


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]]
    links: dict[tuple[int, int], str] = field(default_factory=dict)    # (row, column) -> URL


def _text(value: Any) -> str:
    if isinstance(value, float):
        text = f"{value:.3g}"
    elif isinstance(value, (dict, list)):
        text = "…" if value else ""
    else:
        text = "" if value is None else str(value)
    text = " ".join(text.split())
    return text if len(text) <= 160 else text[:157] + "..."


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


def layout(summary: dict[str, Any], results: list[dict[str, Any]], columns: list[str] | None,
           assessment_key: str) -> tuple[str, str, list[str], list[Table]]:
    """(title, assessment, hints, tables) of a report."""
    title = f"{summary.get('pipeline', 'run')}: report"
    assessment = str(summary.get(assessment_key) or "")
    notes = list(summary.get("hints", []))
    measures = [[key, _text(value)] for key, value in summary.items()
                if key not in SUMMARY_SECTIONS and key != assessment_key]
    tables = [Table("Summary", ["measure", "value"], measures)]
    if summary.get("counts"):
        counts = sorted(summary["counts"].items(), key=lambda kv: -kv[1])
        tables.append(Table(f"Counts by {summary.get('count_by')}", ["value", "count"],
                            [[_text(k), str(v)] for k, v in counts]))
    if summary.get("models"):
        tables.append(Table("Models", ["model", "calls", "cached", "failed", "tokens", "cost"], [
            [name, str(s.get("calls", 0)), str(s.get("cache_hits", 0)), str(s.get("failures", 0)),
             str(s.get("total_tokens", 0)), _text(s.get("cost", 0.0))] for name, s in summary["models"].items()]))
    cols = columns_for(results, columns)
    tables.append(Table("Items", cols, [[_text(lookup(r, c)) for c in cols] for r in results],
                        _trace_links(summary, results, cols)))
    return title, assessment, notes, tables


def _trace_links(summary: dict[str, Any], results: list[dict[str, Any]], cols: list[str]) -> dict[tuple[int, int], str]:
    """Trace ids link to the tracing UI when the run knows its address (summary.tracing.trace_url)."""
    url = (summary.get("tracing") or {}).get("trace_url")
    if not url or "mlflow_trace_id" not in cols:
        return {}
    column = cols.index("mlflow_trace_id")
    return {(row, column): url.replace("{trace_id}", str(r["mlflow_trace_id"]))
            for row, r in enumerate(results) if r.get("mlflow_trace_id")}


def render_report(summary: dict[str, Any], results: list[dict[str, Any]],
                  columns: list[str] | None = None, assessment_key: str = "assessment") -> str:
    title, assessment, notes, tables = layout(summary, results, columns, assessment_key)
    lines = [f"# {title}", ""]
    if assessment:
        lines += [f"**Assessment:** {assessment}", ""]
    for note in notes:
        lines += [f"> {note}", ""]
    for table in tables:
        lines += [f"## {table.title}", "", "| " + " | ".join(table.headers) + " |", "|" + "---|" * len(table.headers)]
        lines += ["| " + " | ".join(_md_cell(cell, table.links.get((i, j))) for j, cell in enumerate(row)) + " |"
                  for i, row in enumerate(table.rows)]
        lines.append("")
    return "\n".join(lines)


def render_html(summary: dict[str, Any], results: list[dict[str, Any]],
                columns: list[str] | None = None, assessment_key: str = "assessment") -> str:
    title, assessment, notes, tables = layout(summary, results, columns, assessment_key)
    esc = html.escape
    parts = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{esc(title)}</title>",
             "<style>body{font-family:system-ui,sans-serif;margin:2rem;max-width:90rem}"
             "table{border-collapse:collapse;margin-bottom:1.5rem}th,td{border:1px solid #ccc;padding:.3rem .6rem;"
             "text-align:left;vertical-align:top}th{background:#f3f3f3}blockquote{background:#fff8e1;margin:0 0 1rem;"
             "padding:.5rem 1rem;border-left:4px solid #f0c000}</style></head><body>", f"<h1>{esc(title)}</h1>"]
    if assessment:
        parts.append(f"<p><strong>Assessment:</strong> {esc(assessment)}</p>")
    parts += [f"<blockquote>{esc(note)}</blockquote>" for note in notes]
    for table in tables:
        parts.append(f"<h2>{esc(table.title)}</h2><table><thead><tr>"
                     + "".join(f"<th>{esc(h)}</th>" for h in table.headers) + "</tr></thead><tbody>")
        parts += ["<tr>" + "".join(f"<td>{_html_cell(cell, table.links.get((i, j)))}</td>"
                                   for j, cell in enumerate(row)) + "</tr>" for i, row in enumerate(table.rows)]
        parts.append("</tbody></table>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _md_cell(text: str, link: str | None) -> str:
    text = text.replace("|", "\\|")
    return f"[{text}]({link})" if link else text


def _html_cell(text: str, link: str | None) -> str:
    return f'<a href="{html.escape(link)}">{html.escape(text)}</a>' if link else html.escape(text)
