"""report.html: one self-contained page (inline style and script, no network) a reviewer
works from: verdict counts, filter and search, a row per item, details on click."""

from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path

from runner.engine.rates import rate_text
from runner.outputs.report_format import review_first
from runner.outputs.report_md import NOTE_LABELS, WHERE_THE_REST_IS, qualified, summary_rows
from runner.outputs.report_view import CallView, ItemView, JuryView, ReportView

ROWS_BUDGET = 12_000_000        # characters of item rows: report.html stays under 15 MB at any size
RESULT_CHARS = 50_000           # of one item's full result in its details
STATUSES = ("pass", "fail", "warn", "error")     # the badge classes; a verdict its items split is warn
REST_HTML = re.sub(r"`([^`]*)`", r"<code>\1</code>", escape(WHERE_THE_REST_IS))     # `name` as <code>name</code>

# The page's style and script, as files beside this one (read once, inlined in every page).
STYLE = (Path(__file__).parent / "report.css").read_text(encoding="utf-8")
SCRIPT = (Path(__file__).parent / "report.js").read_text(encoding="utf-8")


def _table(headers: list[str], rows: list[list[str]], cls: str = "") -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _inputs(pairs: list[tuple[str, str]], links: dict[str, str]) -> str:
    """Short values share one line (file, lines, scores); long ones (claims, quotes) get their own."""
    def value(name: str, text: str) -> str:
        link = links.get(name)
        return f'<a href="{escape(link)}">{escape(text)}</a>' if link else escape(text)

    short = [(k, v) for k, v in pairs if len(v) <= 40 and v.count(" ") < 3]
    long = [(k, v) for k, v in pairs if (k, v) not in short]
    line = " · ".join(f"<i>{escape(k)}</i>{value(k, v)}" for k, v in short)
    return (f'<span class="kv">{line}</span>' if line else "") + "".join(
        f'<span class="kv long"><i>{escape(k)}</i>{value(k, v)}</span>' for k, v in long)


def _call(call: CallView, label: str, with_prompt: bool = True) -> str:
    """One call's prompt (unless the jury shows it once for all its seats) and answer, folded
    until opened."""
    prompt = f"<b>prompt</b><pre>{escape(call.prompt)}</pre>" if with_prompt else ""
    return (f'<details class="call"><summary>{escape(label)}</summary>{prompt}'
            f"<b>response</b><pre>{escape(call.response)}</pre></details>")


def _jury(jury: JuryView) -> str:
    counted = f", resting on {jury.valid_votes} valid vote(s)" if jury.valid_votes is not None else ""
    # The seats of a jury are sent the same messages: their prompt is shown once, above their votes.
    prompts = {call.prompt for vote in jury.votes for call in vote.calls}
    shared = (f'<details class="call"><summary>prompt</summary><pre>{escape(next(iter(prompts)))}</pre></details>'
              if len(prompts) == 1 else "")
    rows = []
    for vote in jury.votes:
        said = f'<span class="err">{escape(vote.error)}</span>' if vote.error else escape(vote.reason)
        calls = "".join(_call(call, f"call {call.call}", with_prompt=not shared) for call in vote.calls) or "-"
        rows.append(f"<tr><td>{escape(vote.model)}</td><td>{escape(vote.value or '-')}</td><td>{said}</td>"
                    f"<td>{'yes' if vote.cached else 'no'}</td><td>{vote.latency_ms} ms</td><td>{calls}</td></tr>")
    return (f"<div><b>Jury</b> <code>{escape(jury.where)}</code>: {escape(jury.verdict)}{escape(counted)}"
            f'<div class="small">{escape(jury.reason)}</div>{shared}'
            "<table><thead><tr><th>model</th><th>verdict</th><th>reason</th><th>cached</th><th>latency</th>"
            f"<th>{'response' if shared else 'prompt and response'}</th></tr></thead><tbody>{''.join(rows)}</tbody>"
            "</table></div>")


def _item(item: ItemView) -> str:
    inputs = _inputs(item.inputs, item.links)
    over = (f'<span class="over">jury: {escape(item.overridden)}, overruled by the pipeline\'s rules</span>'
            if item.overridden else "")
    reason = ('<span class="lbl">the jury said:</span> ' if item.overridden else "") + escape(item.reason)
    reason += f'<div class="err">{escape(item.error)}</div>' if item.error else ""
    flags = "".join(f'<span class="flag">{escape(f)}</span>' for f in item.flags)
    detail = [_jury(j) for j in item.juries]
    detail += [f'<div class="note warnings">{escape(w)}</div>' for w in item.warnings]
    if item.calls and not item.juries:
        detail.append("<div><b>LLM calls:</b>" + "".join(
            _call(call, f"call {call.call}: step {call.step}, model {call.model}") for call in item.calls) + "</div>")
    # Compact JSON (json's C encoder does not indent; its Python one is slow): the page indents it when opened.
    whole = json.dumps(item.result, ensure_ascii=False, default=str)
    if len(whole) > RESULT_CHARS:
        whole = whole[:RESULT_CHARS] + f" … (cut at {RESULT_CHARS} characters: the whole result is in results.jsonl)"
    detail.append(f'<details class="result"><summary>full result</summary><pre>{escape(whole)}</pre></details>')
    search = " ".join([item.verdict, item.reason, item.error, *item.flags, *(v for _, v in item.inputs),
                       *(f"{j.verdict} {j.reason}" for j in item.juries)]).lower()
    return (f'<tbody class="item" data-verdict="{escape(item.verdict)}" data-search="{escape(search)}">'
            f'<tr class="row"><td>{item.index}</td><td>{inputs}</td>'
            f'<td><span class="badge {item.status}">{escape(item.verdict or "-")}</span>{over}</td>'
            f"<td>{reason}</td><td>{flags}</td></tr>"
            f'<tr class="detail" hidden><td colspan="5">{"".join(detail)}</td></tr></tbody>')


def _rows(items: list[ItemView]) -> list[str]:
    """The listed items' rows within ROWS_BUDGET characters (huge results must not make a page
    no browser opens): those needing review first, then passing ones, shown in index order."""
    kept: list[tuple[int, str]] = []
    used = 0
    for order, item in review_first(items, lambda item: item.status == "pass"):
        row = _item(item)
        if kept and used + len(row) > ROWS_BUDGET:
            break
        kept.append((order, row))
        used += len(row)
    return [row for _, row in sorted(kept)]


def render_html(view: ReportView) -> str:
    parts = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{escape(qualified(view.title, view))}</title><style>{STYLE}</style></head><body><main>",
             f"<h1>{escape(qualified(view.title, view))}</h1>"]
    if view.assessment:
        parts.append(f'<p class="assessment"><strong>{escape(qualified("Assessment", view))}:</strong> '
                     f'{escape(view.assessment)}</p>')
    for kind, notes in view.notes.items():
        parts += [f'<div class="note {kind}"><b>{NOTE_LABELS[kind]}:</b> {escape(n)}</div>' for n in notes]
    cards = [("items", view.scope.count), ("need review", str(view.review)), ("errors", str(view.errors))]
    cards += [(name, rate_text(entry, percent=True)) for name, entry in view.rates]
    parts.append('<div class="cards">' + "".join(f"<div class=card><b>{escape(v)}</b><span>{escape(k)}</span></div>"
                                                 for k, v in cards) + "</div>")
    chips = [f'<button class="chip" data-verdict="" data-count="{view.total}" aria-pressed="true">'
             f"all {view.total}</button>"]
    chips += [f'<button class="chip badge {status if status in STATUSES else "warn"}" data-verdict="{escape(k)}" '
              f'data-count="{n}" aria-pressed="false">{escape(k)} {n}</button>' for k, n, status in view.counts]
    parts.append("<h2>Items</h2>")
    rows = _rows(view.items)
    if view.total > len(rows):
        parts.append(f'<div class="note hints" id="unlisted">{len(rows)} of {view.total} items listed here, '
                     f"those that need review first ({view.review} need review in all; the counts and filters "
                     f"count every item). The other {view.total - len(rows)}: {REST_HTML}.</div>")
    parts.append(f'<div class="toolbar">{"".join(chips)}'
                 f'<input id="search" type="search" placeholder="{escape(view.search_hint)}" aria-label="search">'
                 '<button id="expand">expand all</button><button id="collapse">collapse all</button>'
                 f'<span id="shown" data-total="{view.total}"></span></div>')
    parts.append('<table class="items"><colgroup><col class="n"><col class="in"><col class="v"><col class="r">'
                 f'<col class="f"></colgroup><thead><tr><th>#</th><th>item</th><th>{escape(view.verdict_name)}</th>'
                 f"<th>{escape(view.reason_name)}</th><th>flags</th></tr></thead>")
    parts += [*rows, "</table>"]
    parts.append('<div class="wide"><h2>Summary</h2>' + _table(["measure", "value"], summary_rows(view)))
    if view.models:
        parts.append("<h2>Models</h2>" + _table(["model", "calls", "cached", "failed", "tokens", "cost"], view.models))
    if view.juries:
        parts.append("<h2>Juries</h2>" + _table(["jury", "agreement"], [[j, a] for j, a in view.juries]))
    parts.append(f"</div></main><script>{SCRIPT}</script></body></html>")
    return "\n".join([*parts, ""])      # one copy of a page of megabytes, not two
