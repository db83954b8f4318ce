"""report.html: one self-contained page (inline style and script, no network) a reviewer
works from: verdict counts, filter and search, a row per item, details on click."""

from __future__ import annotations

import re
from html import escape

from runner.engine.rates import rate_text
from runner.outputs.report_md import NOTE_LABELS, WHERE_THE_REST_IS, assessment_label, summary_rows, title
from runner.outputs.report_view import CallView, ItemView, JuryView, ReportView, result_json

ROWS_BUDGET = 12_000_000        # characters of item rows: report.html stays under 15 MB at any size
RESULT_CHARS = 50_000           # of one item's full result in its details

STYLE = """
:root{--pass:#1a7f37;--pass-bg:#dafbe1;--fail:#cf222e;--fail-bg:#ffebe9;--warn:#9a6700;--warn-bg:#fff8c5;
--error:#8250df;--error-bg:#fbefff;--line:#d0d7de;--muted:#57606a;--head:#f6f8fa}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1f2328;background:#fff}
main{max-width:1360px;margin:0 auto;padding:1.25rem 1.5rem 3rem}
h1{font-size:1.5rem;margin:.2rem 0 .6rem}h2{font-size:1.1rem;margin:1.6rem 0 .6rem}
.assessment{font-size:1.05rem;margin:.2rem 0 1rem}
.cards{display:flex;flex-wrap:wrap;gap:.6rem;margin:.8rem 0}
.card{border:1px solid var(--line);border-radius:8px;padding:.5rem .9rem;min-width:8rem;background:var(--head)}
.card b{display:block;font-size:1.35rem}.card span{color:var(--muted);font-size:.85rem}
.note{border-left:4px solid;padding:.45rem .8rem;margin:.4rem 0;border-radius:4px}
.note.summary_errors{border-color:var(--fail);background:var(--fail-bg)}
.note.run_warnings,.note.warnings{border-color:var(--warn);background:var(--warn-bg)}
.note.hints{border-color:#0969da;background:#ddf4ff}
.badge{display:inline-block;border-radius:999px;padding:.05rem .6rem;font-weight:600;font-size:.82rem;
white-space:nowrap;border:1px solid transparent}
.pass{color:var(--pass);background:var(--pass-bg);border-color:#4ac26b}
.fail{color:var(--fail);background:var(--fail-bg);border-color:#ff8182}
.warn{color:var(--warn);background:var(--warn-bg);border-color:#d4a72c}
.error{color:var(--error);background:var(--error-bg);border-color:#c297ff}
.toolbar{position:sticky;top:0;z-index:2;background:#fff;display:flex;flex-wrap:wrap;gap:.5rem;align-items:center;
padding:.6rem 0;border-bottom:1px solid var(--line)}
.toolbar button{font:inherit;cursor:pointer;border-radius:999px;padding:.15rem .7rem;border:1px solid var(--line);
background:#fff}
.toolbar button.chip[aria-pressed=true]{outline:2px solid #0969da;outline-offset:1px}
.toolbar input{font:inherit;padding:.3rem .6rem;border:1px solid var(--line);border-radius:6px;width:18rem}
#shown{color:var(--muted);margin-left:auto}
table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid var(--line);padding:.45rem .5rem;text-align:left;vertical-align:top;
overflow-wrap:anywhere}
th{background:var(--head);font-weight:600}
table.items{table-layout:fixed}
table.items col.n{width:3.5rem}table.items col.in{width:38%}table.items col.v{width:11rem}
table.items col.f{width:9rem}
tr.row{cursor:pointer}tr.row:hover{background:#f6f8fa}
tr.row td:first-child::before{content:"\\25B8 ";color:var(--muted)}
tbody.open tr.row td:first-child::before{content:"\\25BE "}
.kv{display:block}.kv i{font-style:normal;color:var(--muted);margin-right:.3rem}
.kv.long{margin-top:.2rem}
.over{display:block;color:var(--muted);font-size:.82rem;margin-top:.25rem}
.flag{display:inline-block;background:#eaeef2;border-radius:4px;padding:0 .35rem;margin:0 .2rem .2rem 0;
font-size:.8rem;font-family:ui-monospace,monospace}
.err{color:var(--fail)}.lbl{color:var(--muted)}
tr.detail>td{background:#fbfcfd;padding:.6rem 1rem 1rem}
tr.detail table{margin:.3rem 0 .6rem;font-size:.9rem}
tr.detail pre{white-space:pre-wrap;background:#f6f8fa;padding:.6rem;border-radius:6px;max-height:24rem;
overflow:auto;font-size:.8rem}
.small{font-size:.85rem;color:var(--muted)}
.wide table{font-size:.9rem}
"""

SCRIPT = """
(function(){
  var items=[].slice.call(document.querySelectorAll('tbody.item'));
  var chips=[].slice.call(document.querySelectorAll('button.chip'));
  var search=document.getElementById('search'), shown=document.getElementById('shown');
  var verdict='', inRun=Number(shown.dataset.total), total=inRun;
  function apply(){
    var q=search.value.trim().toLowerCase(), n=0;
    items.forEach(function(t){
      var ok=(!verdict||t.dataset.verdict===verdict)&&(!q||t.dataset.search.indexOf(q)>=0);
      t.hidden=!ok; if(ok){n++;}
    });
    shown.textContent='showing '+n+' of '+items.length+(total>items.length?' listed ('+inRun+' in the run)':'');
  }
  chips.forEach(function(c){c.addEventListener('click',function(){
    verdict=c.dataset.verdict; inRun=Number(c.dataset.count);
    chips.forEach(function(o){o.setAttribute('aria-pressed',String(o===c));});
    apply();
  });});
  search.addEventListener('input',apply);
  items.forEach(function(t){t.querySelector('tr.row').addEventListener('click',function(){
    t.classList.toggle('open'); t.querySelector('tr.detail').hidden=!t.classList.contains('open');
  });});
  function all(open){items.forEach(function(t){t.classList.toggle('open',open);
    t.querySelector('tr.detail').hidden=!open;});}
  document.getElementById('expand').addEventListener('click',function(){all(true);});
  document.getElementById('collapse').addEventListener('click',function(){all(false);});
  [].slice.call(document.querySelectorAll('details.result')).forEach(function(d){
    d.addEventListener('toggle',function(){
      var pre=d.querySelector('pre');
      if(!d.open||pre.dataset.indented){return;}
      try{pre.textContent=JSON.stringify(JSON.parse(pre.textContent),null,2);}catch(e){}
      pre.dataset.indented='1';
    });
  });
  apply();
})();
"""


def _code_spans(text: str) -> str:
    """`name` as <code>name</code>: our own markdown phrases, once escaped."""
    return re.sub(r"`([^`]*)`", r"<code>\1</code>", text)


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
    detail.append('<details class="result"><summary>full result</summary>'
                  f"<pre>{escape(result_json(item.result, RESULT_CHARS))}</pre></details>")
    return (f'<tbody class="item" data-verdict="{escape(item.verdict)}" data-search="{escape(item.search_text)}">'
            f'<tr class="row"><td>{item.index}</td><td>{inputs}</td>'
            f'<td><span class="badge {item.status}">{escape(item.verdict or "-")}</span>{over}</td>'
            f"<td>{reason}</td><td>{flags}</td></tr>"
            f'<tr class="detail" hidden><td colspan="5">{"".join(detail)}</td></tr></tbody>')


def _rows(items: list[ItemView]) -> list[str]:
    """The listed items' rows within ROWS_BUDGET characters (huge results must not make a page
    no browser opens): those needing review first, then passing ones, shown in index order."""
    kept: list[tuple[int, int, str]] = []
    used = 0
    for order, item in sorted(enumerate(items), key=lambda pair: pair[1].status == "pass"):
        row = _item(item)
        if kept and used + len(row) > ROWS_BUDGET:
            break
        kept.append((order, item.index, row))
        used += len(row)
    return [row for _, _, row in sorted(kept)]


def render_html(view: ReportView) -> str:
    parts = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{escape(title(view))}</title><style>{STYLE}</style></head><body><main>",
             f"<h1>{escape(title(view))}</h1>"]
    if view.assessment:
        parts.append(f'<p class="assessment"><strong>{escape(assessment_label(view))}:</strong> '
                     f'{escape(view.assessment)}</p>')
    for kind, notes in view.notes.items():
        parts += [f'<div class="note {kind}"><b>{NOTE_LABELS[kind]}:</b> {escape(n)}</div>' for n in notes]
    cards = [("items", view.scope.count), ("need review", str(view.review)), ("errors", str(view.errors))]
    cards += [(name, rate_text(entry, percent=True)) for name, entry in view.rates]
    parts.append('<div class="cards">' + "".join(f"<div class=card><b>{escape(v)}</b><span>{escape(k)}</span></div>"
                                                 for k, v in cards) + "</div>")
    chips = [f'<button class="chip" data-verdict="" data-count="{view.total}" aria-pressed="true">'
             f"all {view.total}</button>"]
    chips += [f'<button class="chip badge {status}" data-verdict="{escape(k)}" data-count="{n}" aria-pressed="false">'
              f"{escape(k)} {n}</button>" for k, n, status in view.counts]
    parts.append("<h2>Items</h2>")
    rows = _rows(view.items)
    if view.total > len(rows):
        parts.append(f'<div class="note hints" id="unlisted">{len(rows)} of {view.total} items listed here, '
                     f"those that need review first ({view.review} need review in all; the counts and filters "
                     f"count every item). The other {view.total - len(rows)}: "
                     f"{_code_spans(escape(WHERE_THE_REST_IS))}.</div>")
    parts.append(f'<div class="toolbar">{"".join(chips)}'
                 f'<input id="search" type="search" placeholder="{escape(view.search_hint)}" aria-label="search">'
                 '<button id="expand">expand all</button><button id="collapse">collapse all</button>'
                 f'<span id="shown" data-total="{view.total}"></span></div>')
    parts.append('<table class="items"><colgroup><col class="n"><col class="in"><col class="v"><col class="r">'
                 f'<col class="f"></colgroup><thead><tr><th>#</th><th>item</th><th>{escape(view.verdict_name)}</th>'
                 f"<th>{escape(view.reason_name)}</th><th>flags</th></tr></thead>")
    parts += rows
    parts.append("</table>")
    parts.append('<div class="wide"><h2>Summary</h2>' + _table(["measure", "value"], summary_rows(view)))
    if view.models:
        parts.append("<h2>Models</h2>" + _table(["model", "calls", "cached", "failed", "tokens", "cost"], view.models))
    if view.juries:
        parts.append("<h2>Juries</h2>" + _table(["jury", "agreement"], [[j, a] for j, a in view.juries]))
    parts.append(f"</div></main><script>{SCRIPT}</script></body></html>")
    return "\n".join(parts) + "\n"
