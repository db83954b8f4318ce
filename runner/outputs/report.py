"""report.md: the report as text, from the same view as report.html (report_view.py)."""

from __future__ import annotations

from runner.outputs.report_view import ItemView, ReportView

NOTE_LABELS = {"summary_errors": "Summary error", "run_warnings": "Warning", "hints": "Hint"}


def _cell(value: str) -> str:
    return value.replace("|", "\\|")


def _linked(item: ItemView, columns: list[str]) -> list[str]:
    """The item's cells, a cell with a link (its trace) as [text](url); escaped here, not again."""
    return [f"[{_cell(cell)}]({item.links[column]})" if column in item.links else _cell(cell)
            for column, cell in zip(columns, item.cells, strict=True)]


def _table(headers: list[str], rows: list[list[str]], escaped: bool = False) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(c if escaped else _cell(c) for c in row) + " |" for row in rows] + [""]


def percent(rate: float) -> str:
    return f"{rate * 100:.1f}%"


def summary_rows(view: ReportView) -> list[list[str]]:
    rows = [["total", str(view.total)], ["errors", str(view.errors)]]
    rows += [[name, percent(rate) + (f" ({count}/{view.total})" if count is not None else "")]
             for name, rate, count in view.rates]
    return rows + [[k, v] for k, v in view.measures]


def render_report(view: ReportView) -> str:
    lines = [f"# {view.title}", ""]
    if view.assessment:
        lines += [f"**Assessment:** {view.assessment}", ""]
    for kind, notes in view.notes.items():
        lines += [f"> **{NOTE_LABELS[kind]}:** {note}\n" for note in notes]
    lines += ["## Summary", ""] + _table(["measure", "value"], summary_rows(view))
    if view.counts:
        lines += [f"## Counts by {view.count_by}", ""]
        lines += _table([str(view.count_by), "count", "status"], [[k, str(n), s] for k, n, s in view.counts])
    if view.models:
        lines += ["## Models", ""] + _table(["model", "calls", "cached", "failed", "tokens", "cost"], view.models)
    if view.juries:
        lines += ["## Juries", ""] + _table(["jury", "agreement"], [[j, a] for j, a in view.juries])
    with_flags = any(item.flags for item in view.items)
    headers = ["index", *view.columns, *(["flags"] if with_flags else [])]
    rows = [[str(i.index), *_linked(i, view.columns), *([_cell(", ".join(i.flags))] if with_flags else [])]
            for i in view.items]
    lines += ["## Items", ""] + _table(headers, rows, escaped=True)
    detailed = [item for item in view.items if item.juries or item.error or item.warnings or item.logs]
    if detailed:
        lines += ["## Item details", ""]
        for item in detailed:
            lines += _details(item)
    return "\n".join(lines)


def _details(item: ItemView) -> list[str]:
    lines = [f"### Item {item.index}: {item.verdict or '-'}", ""]
    lines += [f"- {name}: {value}" for name, value in item.inputs]
    if item.overridden:
        lines.append(f"- final verdict {item.verdict} overrides the jury's {item.overridden} "
                     "(the pipeline's rules decide after the jury)")
    if item.error:
        lines.append(f"- **error:** {item.error}")
    lines += [f"- warning: {w}" for w in item.warnings]
    for jury in item.juries:
        counted = f", {jury.valid_votes} valid vote(s)" if jury.valid_votes is not None else ""
        lines.append(f"- jury `{jury.where}`: {jury.verdict}{counted}: {jury.reason}")
        for vote in jury.votes:
            how = f"{'cached' if vote.cached else f'{vote.latency_ms} ms'}"
            said = f"error: {vote.error}" if vote.error else f"{vote.value}: {vote.reason}"
            links = " ".join(f"[{name}](llm_logs/{name})" for name in vote.logs)
            lines.append(f"  - {vote.model} ({how}): {said} {links}".rstrip())
    if item.logs and not item.juries:
        lines.append("- logs: " + " ".join(f"[{name}](llm_logs/{name})" for name in item.logs))
    return lines + [""]
