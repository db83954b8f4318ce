"""What a report shows, built once from summary.json, the results and calls.jsonl, so that
report.md and report.html never disagree.

Generic over pipelines: the verdict is the summary's `count_by` field (else the item's status),
an item passes by the pipeline's pass rule (`summary.pass_when`, else its first summary rate),
the reason is `summary.reason_field` (else a column named like a reason), key inputs are
`summary.report_columns`, a jury is any object in a result holding `votes`, flags are string
lists named `*flags`. Bounded at any size: counts over every result, rows for at most `limit`
items (report_format.py), and the LLM calls of those rows only."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.engine.rates import lookup, rate_entries
from runner.llm.calls.file import read_calls
from runner.llm.calls.record import format_messages, response_text
from runner.outputs.report_format import HTML_ROWS, LowestIndex, RunScope, count_label, cut, index_of, safe_url, text
from runner.pipeline.model import ASSESSMENT_KEY

REASON_NAMES = ("reason", "rationale", "explanation")
ERROR_NAMES = ("error", "error_message")
SUMMARY_SECTIONS = {"pipeline", "counts", "count_by", "models", "juries", "hints", "run_warnings", "summary_errors",
                    "total", "errors", "memo", "planned", "input_items", "rerun_items", "error_groups",
                    "interrupted", "partial", "rerun_of"}
MAX_COLUMNS = 40
FIELD_CHARS = 4000          # one value as a report shows it; the whole value stays in results.jsonl
CALL_CHARS = 4000           # a call's prompt or answer as a report shows it; the whole call stays in calls.jsonl
BAD = re.compile(r"ERROR|NOT_FOUND|INVALID|FAIL|RED|CONTRADICT|HALLUCINAT|OUTSIDE|MISLEADING|UNSUPPORTED|FALSE",
                 re.IGNORECASE)
GOOD = re.compile(r"^(VALID|PASS(ED)?|GREEN|OK|SUPPORTS?|SUPPORTED|CORRECT|TRUE|YES)$", re.IGNORECASE)


def _last(column: str) -> str:
    return column.rsplit(".", 1)[-1]


@dataclass
class CallView:
    """One LLM call of a listed row, as the report shows it (cut to CALL_CHARS)."""
    call: str                                     # ITEM.N, as calls.jsonl names it
    model: str
    step: str
    prompt: str
    response: str


@dataclass
class VoteView:
    model: str
    value: str
    reason: str
    cached: bool
    latency_ms: int
    error: str
    calls: list[CallView]


@dataclass
class JuryView:
    where: str
    verdict: str
    reason: str
    valid_votes: int | None
    votes: list[VoteView]


@dataclass
class ItemView:
    index: int
    status: str                                   # pass | fail | warn | error
    verdict: str
    inputs: list[tuple[str, str]]
    reason: str
    flags: list[str]
    error: str
    warnings: list[str]
    juries: list[JuryView]
    overridden: str                               # the jury's verdict when the final verdict differs
    calls: list[CallView]                         # the item's LLM calls, in the order they ended
    cells: list[str]                              # the configured columns, for the markdown table
    result: dict[str, Any]
    links: dict[str, str]                         # column -> URL (a trace in the tracing UI)


@dataclass
class ReportView:
    title: str
    assessment: str
    count_by: str | None
    total: int
    errors: int
    counts: list[tuple[str, int, str]]            # verdict, count, status
    rates: list[tuple[str, dict[str, Any]]]       # name, summary.json's rates.NAME entry
    measures: list[tuple[str, str]]
    notes: dict[str, list[str]]                   # summary_errors, run_warnings, hints
    models: list[list[str]]
    juries: list[tuple[str, str]]
    columns: list[str]
    items: list[ItemView]                         # at most `limit`: those needing review first
    review: int                                   # items of the whole run that need a person (not pass)
    scope: RunScope
    reason_name: str

    @property
    def verdict_name(self) -> str:
        return self.count_by or "status"

    @property
    def search_hint(self) -> str:
        names = [_last(c) for c in self.columns if c != self.count_by][:3]
        return "search " + ", ".join(names or [self.verdict_name, self.reason_name]) + "…"

    @property
    def unlisted(self) -> int:
        return max(self.scope.done - len(self.items), 0)


def call_view(record: dict[str, Any], limit: int = CALL_CHARS, shown: dict[str, str] | None = None) -> CallView:
    """A call of calls.jsonl as a page shows it: prompt and response cut at `limit` characters.
    `shown`: the prompts made into text so far (prompt -> text), shared by the calls of a page."""
    messages = record.get("messages")
    prompt = format_messages(messages) if isinstance(messages, list) else ""
    shown = {} if shown is None else shown
    if prompt not in shown:
        shown[prompt] = text(prompt, limit)
    return CallView(text(record.get("call"), 40), text(record.get("model"), 200), text(record.get("step"), 200),
                    shown[prompt], text(response_text(record), limit))


def _juries(value: dict[str, Any], where: str, field_name: str,
            calls: Callable[[str], list[CallView]]) -> list[JuryView]:
    votes = value.get("votes")
    if isinstance(votes, list) and votes and all(isinstance(v, dict) and "model" in v for v in votes):
        return [JuryView(where, text(value.get(field_name)), text(value.get("reason")), value.get("valid_votes"),
                         [_vote(v, calls) for v in votes])]
    return [jury for key, inner in value.items() if isinstance(inner, dict)
            for jury in _juries(inner, f"{where}.{key}" if where else key, field_name, calls)]


def _vote(vote: dict[str, Any], calls: Callable[[str], list[CallView]]) -> VoteView:
    answer: dict[str, Any] = vote["answer"] if isinstance(vote.get("answer"), dict) else {}
    reason = next((text(answer[n], FIELD_CHARS) for n in REASON_NAMES if answer.get(n)), "")
    return VoteView(text(vote["model"], 200), text(vote.get("value"), 200), reason, bool(vote.get("cached")),
                    _int(vote.get("latency_ms")), text(vote.get("error"), FIELD_CHARS), calls(str(vote["model"])))


def status_of(verdict: str, error: str, passed: bool | None) -> str:
    """pass (green), fail (red), warn (amber: neither, e.g. a hung jury) or error. An item that
    fails the pass rule is red when its verdict says it failed (or it has none), else amber:
    a HUNG_JURY is not a pass, nor a judgement that the item is wrong (issue 50)."""
    if error:
        return "error"
    if passed is True or (passed is None and (not verdict or GOOD.match(verdict))):
        return "pass"
    if passed is False and not verdict:
        return "fail"
    return "fail" if BAD.search(verdict) or verdict == "no" else "warn"     # "no": a false boolean


def error_of(result: dict[str, Any]) -> str:
    """The item's error as text: a message, not `True` when a pipeline flags errors with a boolean."""
    flagged = False
    for name in ERROR_NAMES:
        value = result.get(name)
        if isinstance(value, bool):
            flagged = flagged or value
        elif value:
            return text(value, FIELD_CHARS)
    return "error" if flagged else ""


def verdict_of(result: dict[str, Any], count_by: str | None) -> str:
    """The verdict as the summary counted it (summary.py's key, then count_label), so a badge
    and its filter chip always carry the same text."""
    if not count_by:
        return ""
    value = lookup(result, count_by)
    return "ERROR" if value is None and result.get("error") else count_label(str(value))


def item_label(result: dict[str, Any], columns: list[str] | None) -> str:
    """`item 3 (file notes.txt, line 12)`: the index and the first configured key inputs."""
    keys = [(_last(c), text(lookup(result, c), 60)) for c in (columns or [])[:3]]
    shown = ", ".join(f"{name} {value}" for name, value in keys if value)
    return f"item {result.get('index')}" + (f" ({shown})" if shown else "")


def trace_url_of(summary: dict[str, Any]) -> str | None:
    """Where the run's traces are in the tracing UI (summary.tracing.trace_url), if it knows."""
    return _section(summary, "tracing").get("trace_url")


def _reason_columns(columns: list[str], reason_field: str | None) -> list[str]:
    return [reason_field] if reason_field else [c for c in columns if _last(c) in REASON_NAMES]


def item_reason(result: dict[str, Any], columns: list[str], reason_field: str | None = None,
                juries: list[JuryView] | None = None) -> str:
    """The reason every page shows for a result (report.md, report.html, `runner view`'s list):
    `summary.reason_field`; else the first column named like a reason, a top-level field named
    so, or a jury's reason (`juries`: the result's, found by `_juries` when not given)."""
    for column in _reason_columns(columns, reason_field):
        value = lookup(result, column)
        if value:
            return cut(text(value, FIELD_CHARS), FIELD_CHARS)
    if reason_field:
        return ""
    found = next((text(result[n], FIELD_CHARS) for n in REASON_NAMES if result.get(n)), "")
    if found:
        return found
    if juries is None:
        juries = _juries(result, "", "verdict", lambda model: [])
    return next((j.reason for j in juries if j.reason), "")


def build_item(result: dict[str, Any], columns: list[str], count_by: str | None,
               passed: bool | None, calls: dict[int, list[CallView]],
               trace_url: str | None = None, reason_field: str | None = None) -> ItemView:
    index = index_of(result)
    verdict = verdict_of(result, count_by)
    error = error_of(result)
    item_calls = calls.get(index, [])
    juries = _juries(result, "", count_by or "verdict", lambda model: [c for c in item_calls if c.model == model])
    reason_cols = _reason_columns(columns, reason_field)
    # Each column read and written out once (to FIELD_CHARS, the most any place shows), then cut to
    # what each place shows.
    values = {c: lookup(result, c) for c in columns}
    texts = {c: text(v, FIELD_CHARS) for c, v in values.items()}
    reason = item_reason(result, columns, reason_field, juries)
    skip = {count_by, *ERROR_NAMES, *reason_cols}
    inputs = [(_last(c), cut(texts[c], FIELD_CHARS)) for c in columns if c not in skip and values[c] is not None]
    overridden = next((j.verdict for j in juries if j.verdict and verdict and j.verdict != verdict), "")
    status = status_of(verdict, error, passed)
    flags = [text(v) for key, value in result.items() if key.endswith("flags") and isinstance(value, list)
             for v in value]
    warnings = result.get("warnings")
    warnings = warnings if isinstance(warnings, list) else [warnings] if warnings else []
    trace_id = result.get("mlflow_trace_id")       # the item's trace in the tracing UI, when the run knows it
    link = safe_url(trace_url.replace("{trace_id}", str(trace_id))) if trace_url and trace_id else None
    return ItemView(index, status, verdict or status, inputs, reason, flags, error,
                    [text(w, FIELD_CHARS) for w in warnings], juries, overridden, item_calls,
                    [cut(texts[c], 300) for c in columns], result, {"mlflow_trace_id": link} if link else {})


class RowChooser:
    """A report's rows and columns, chosen in one pass over any number of results with bounded
    state: tallies, and at most `limit` rows, those that need a person first (errored, failed,
    neither), then passing ones. The columns are the configured ones, else every scalar field
    seen (in first-seen order, at most MAX_COLUMNS), plus `error` when any result has one."""

    def __init__(self, configured: list[str] | None, count_by: str | None, limit: int = HTML_ROWS) -> None:
        self.fixed = [c for c in configured if c != "index"] if configured else None
        self.fields: dict[str, None] = {}
        self.errored = False
        self.count_by = count_by
        self.limit = limit
        self.seen = 0
        self.statuses: Counter[str] = Counter()
        self.verdict_statuses: dict[str, Counter[str]] = {}     # each verdict's items by status
        self._review, self._passing = LowestIndex(limit), LowestIndex(limit)

    def add(self, result: dict[str, Any], passed: bool | None) -> None:
        """One result, and whether it meets the pass rule (None: there is none; kept with a chosen row)."""
        if self.fixed is None:
            self.errored = self.errored or "error" in result
            if len(self.fields) < MAX_COLUMNS:
                self.fields.update((k, None) for k, v in result.items()
                                   if k not in ("index", "item_key", "warnings") and not isinstance(v, (dict, list)))
        verdict = verdict_of(result, self.count_by)
        status = status_of(verdict, error_of(result), passed)
        self.seen += 1
        self.statuses[status] += 1
        self.verdict_statuses.setdefault(verdict, Counter())[status] += 1
        (self._passing if status == "pass" else self._review).offer(self.seen, result, passed)

    def columns(self) -> list[str]:
        if self.fixed is not None:
            return self.fixed
        return [*self.fields, *(["error"] if self.errored and "error" not in self.fields else [])]

    def chosen(self) -> list[tuple[dict[str, Any], bool | None]]:
        """(result, passed) of the chosen rows, in index order."""
        chosen = self._review.results()
        chosen += self._passing.results()[:self.limit - len(chosen)]
        return sorted(chosen, key=lambda row: index_of(row[0]))


def build_view(summary: dict[str, Any], results: Iterable[dict[str, Any]], configured: list[str] | None = None,
               assessment_key: str = ASSESSMENT_KEY, passed: Callable[[dict[str, Any]], bool | None] | None = None,
               calls_file: Path | None = None, *, limit: int = HTML_ROWS) -> ReportView:
    """The view over every result, holding only counts and at most `limit` rows: `results` may
    be a reader over results.jsonl, or a generator: it is iterated once."""
    chosen = RowChooser(configured, summary.get("count_by"), limit)
    for result in results:
        chosen.add(result, passed(result) if passed else None)
    return view_of(summary, chosen, assessment_key, calls_file)


def view_of(summary: dict[str, Any], chosen: RowChooser, assessment_key: str, calls_file: Path | None, *,
            reason_field: str | None = None) -> ReportView:
    """The view, once every result went through `chosen` (its count_by is the summary's):
    each row passes as it did there."""
    count_by = summary.get("count_by")
    picked = chosen.chosen()
    columns = chosen.columns()
    # The calls of the chosen rows, in the order they ended (calls.jsonl read once, the others not
    # parsed); a jury's seats share one prompt, made into text once.
    calls: dict[int, list[CallView]] = {}
    shown: dict[str, str] = {}
    if calls_file is not None and picked:
        for record in read_calls(calls_file, {index_of(r) for r, _ in picked}):
            calls.setdefault(int(record["item"]), []).append(call_view(record, shown=shown))
    trace_url = trace_url_of(summary)
    items = [build_item(r, columns, count_by, passed, calls, trace_url, reason_field) for r, passed in picked]
    if count_by:
        counts = [(count_label(str(k)), _int(v), _statuses(chosen.verdict_statuses.get(count_label(str(k)))))
                  for k, v in sorted(_section(summary, "counts").items(), key=lambda kv: -_int(kv[1]))]
    else:
        counts = [(s, n, s) for s, n in chosen.statuses.most_common()]
    entries = rate_entries(summary)
    hidden = SUMMARY_SECTIONS | set(entries) | {f"{k}_count" for k in entries} | {"rates", assessment_key}
    measures = [(k, text(v, 200)) for k, v in summary.items() if k not in hidden]
    models = [[name, text(s.get("calls", 0)), text(s.get("cache_hits", 0)), text(s.get("failures", 0)),
               text(s.get("total_tokens", 0)), f"${_float(s.get('cost')):.4f}"]
              for name, s in _section(summary, "models").items() if isinstance(s, dict)]
    juries = [(step, _agreement_text(info)) for step, info in _section(summary, "juries").items()
              if isinstance(info, dict)]
    notes = {kind: [text(n) for n in summary[kind]] if isinstance(summary.get(kind), list) else []
             for kind in ("summary_errors", "run_warnings", "hints")}
    scope = RunScope.of(summary, chosen.seen)
    title = f"{text(summary.get('pipeline')) or 'run'}: report"
    reason_name = _last(reason_field) if reason_field else next(
        (_last(c) for c in columns if _last(c) in REASON_NAMES), "reason")
    return ReportView(title, text(summary.get(assessment_key)), count_by, scope.done, _int(summary.get("errors", 0)),
                      counts, list(entries.items()), measures, notes, models, juries, columns, items,
                      chosen.seen - chosen.statuses["pass"], scope, reason_name)


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        else 0


def _float(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _section(summary: dict[str, Any], name: str) -> dict[str, Any]:
    value = summary.get(name)
    return value if isinstance(value, dict) else {}


def _statuses(seen: Counter[str] | None) -> str:
    """A verdict's status (`pass`), or how many of its items have each when a pass rule that
    reads more than the verdict splits them (`pass 3, fail 1`)."""
    order = ("pass", "fail", "warn", "error")         # the same text whatever order the items came in
    return "warn" if not seen else next(iter(seen)) if len(seen) == 1 else ", ".join(
        f"{s} {seen[s]}" for s in order if seen[s])


def _agreement_text(info: dict[str, Any]) -> str:
    """A jury's agreement, by the measure that fits its votes (summary.json's `juries`), each
    figure with the items it is over."""
    if "krippendorff_alpha" in info:
        overall = "Krippendorff's alpha (interval) " + _over(info, "krippendorff_alpha", "two or more jurors")
        pairs, name = info.get("pairwise_mean_abs_difference"), "mean absolute difference"
    else:
        overall = "Fleiss' kappa " + _over(info, "fleiss_kappa", "every juror")
        pairs, name = info.get("pairwise_agreement"), "agreement"
    given = info.get("pairwise_items")
    items: dict[str, Any] = given if isinstance(given, dict) else {}
    shown = ", ".join(f"{pair} {text(value) or '-'}" + (f" (n {items[pair]})" if pair in items else "")
                      for pair, value in pairs.items()) if isinstance(pairs, dict) else ""
    return f"{text(info.get('items'))} item(s); {overall}; pairwise {name} {shown or '-'}"


def _over(info: dict[str, Any], figure: str, who: str) -> str:
    """The figure, and the items it is over: those `who` voted on."""
    n = info.get(f"{figure}_items")
    return (text(info.get(figure)) or "-") + (f" (n {n}: items {who} voted on)" if n is not None else "")
