"""report.md: the report as text, from the same view as report.html (report_view.py). Every
value from a result or an answer goes through `markdown()`: no raw HTML, no links but ours."""

from __future__ import annotations

from urllib.parse import quote

from runner.engine.rates import rate_text
from runner.outputs.report_format import MARKDOWN_ROWS, markdown, review_first
from runner.outputs.report_view import ItemView, ReportView

NOTE_LABELS = {"summary_errors": "Summary error", "run_warnings": "Warning", "hints": "Hint"}
URL_SAFE = ":/?#[]@!$&'*+,;=%~"     # parentheses, spaces and angle brackets are encoded: they end a link
WHERE_THE_REST_IS = "every result is in results.jsonl (`runner view` browses them all)"


def _linked(item: ItemView, columns: list[str]) -> list[str]:
    """The item's cells, a cell with a link (its trace) as [text](url)."""
    return [f"[{markdown(cell)}]({quote(item.links[column], safe=URL_SAFE)})"
            if column in item.links else markdown(cell)
            for column, cell in zip(columns, item.cells, strict=True)]


def _table(headers: list[str], rows: list[list[str]], escaped: bool = False) -> list[str]:
    lines = ["| " + " | ".join(markdown(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(c if escaped else markdown(c) for c in row) + " |" for row in rows] + [""]


def qualified(label: str, view: ReportView) -> str:
    """`Assessment` or `Assessment (159 of 300 items, interrupted)`: the title and the pipeline's
    text speak of what ran, so an incomplete run says what it covers."""
    headline = view.scope.headline
    return label + (f" ({headline})" if headline else "")


def summary_rows(view: ReportView) -> list[list[str]]:
    rows = [["total", view.scope.count], ["errors", str(view.errors)]]
    rows += [[name, rate_text(entry, percent=True)] for name, entry in view.rates]
    return rows + [[k, v] for k, v in view.measures]


def render_report(view: ReportView) -> str:
    lines = [f"# {markdown(qualified(view.title, view))}", ""]
    if view.assessment:
        lines += [f"**{markdown(qualified('Assessment', view))}:** {markdown(view.assessment)}", ""]
    for kind, notes in view.notes.items():
        lines += [f"> **{NOTE_LABELS[kind]}:** {markdown(note)}\n" for note in notes]
    lines += ["## Summary", ""] + _table(["measure", "value"], summary_rows(view))
    if view.counts:
        lines += [f"## Counts by {markdown(view.verdict_name)}", ""]
        lines += _table([view.verdict_name, "count", "status"], [[k, str(n), s] for k, n, s in view.counts])
    if view.models:
        lines += ["## Models", ""] + _table(["model", "calls", "cached", "failed", "tokens", "cost"], view.models)
    if view.juries:
        lines += ["## Juries", ""] + _table(["jury", "agreement"], [[j, a] for j, a in view.juries])
    ranked = review_first(view.items, lambda item: item.status == "pass")[:MARKDOWN_ROWS]
    shown = [item for _, item in sorted(ranked)]            # positions are unique: items never compared
    with_flags = any(item.flags for item in shown)
    headers = ["index", *view.columns, *(["flags"] if with_flags else [])]
    rows = [[str(i.index), *_linked(i, view.columns), *([markdown(", ".join(i.flags))] if with_flags else [])]
            for i in shown]
    lines += ["## Items", ""]
    if view.total > len(shown):          # a capped report says where the items it leaves out are
        lines += [f"{len(shown)} of {view.total} items listed, those that need review first ({view.review} need "
                  f"review in all); {view.total - len(shown)} more not listed: {WHERE_THE_REST_IS}.", ""]
    lines += _table(headers, rows, escaped=True)
    if detailed := [item for item in shown if item.juries or item.error or item.warnings or item.calls]:
        lines += ["## Item details", ""]
        for item in detailed:
            lines += _details(item)
    return "\n".join(lines)


def _details(item: ItemView) -> list[str]:
    lines = [f"### Item {item.index}: {markdown(item.verdict or '-')}", ""]
    lines += [f"- {markdown(name)}: {markdown(value)}" for name, value in item.inputs]
    if item.overridden:
        lines.append(f"- final verdict {markdown(item.verdict)} overrides the jury's {markdown(item.overridden)} "
                     "(the pipeline's rules decide after the jury)")
    if item.error:
        lines.append(f"- **error:** {markdown(item.error)}")
    lines += [f"- warning: {markdown(w)}" for w in item.warnings]
    for jury in item.juries:
        counted = f", {jury.valid_votes} valid vote(s)" if isinstance(jury.valid_votes, int) else ""
        lines.append(f"- jury `{jury.where.replace('`', '')}`: {markdown(jury.verdict)}{counted}: "
                     f"{markdown(jury.reason)}")
        for vote in jury.votes:
            how = "cached" if vote.cached else f"{vote.latency_ms} ms"
            said = (f"error: {markdown(vote.error)}" if vote.error
                    else f"{markdown(vote.value)}: {markdown(vote.reason)}")
            # `(call 3.1, 3.2)`: the calls' names in calls.jsonl (`runner calls RUN --item 3` prints them)
            called = f"(call {', '.join(markdown(call.call) for call in vote.calls)})" if vote.calls else ""
            lines.append(f"  - {markdown(vote.model)} ({how}): {said} {called}".rstrip())
    if item.calls:
        lines.append(f"- LLM calls: {len(item.calls)} in calls.jsonl (`runner calls <run folder> --item {item.index}` "
                     "prints them)")
    return lines + [""]
