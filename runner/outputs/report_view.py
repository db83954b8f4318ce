"""What a report shows, built once from summary.json, the results and llm_logs/, so that
report.md and report.html never disagree.

Generic over pipelines: the verdict is the summary's `count_by` field, an item passes by the
pipeline's pass rule (its first summary rate), key inputs are `summary.report_columns`, a
jury is any object in a result holding `votes`, flags are string lists named `*flags`."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOG_NAME = re.compile(r"^(?P<model>.+)_(?P<seq>\d{4})_item(?P<item>\d+)\.txt$")
REASON_NAMES = ("reason", "rationale", "explanation")
ERROR_NAMES = ("error", "error_message")
SUMMARY_SECTIONS = {"pipeline", "counts", "count_by", "models", "juries", "hints", "run_warnings", "summary_errors",
                    "total", "errors", "memo", "planned", "input_items", "rerun_items", "error_groups"}
BAD = re.compile(r"ERROR|NOT_FOUND|INVALID|FAIL|RED|CONTRADICT|HALLUCINAT|OUTSIDE|MISLEADING|UNSUPPORTED|FALSE",
                 re.IGNORECASE)
GOOD = re.compile(r"^(VALID|PASS(ED)?|GREEN|OK|SUPPORTS?|SUPPORTED|CORRECT|TRUE|YES)$", re.IGNORECASE)


def text(value: Any, limit: int | None = None) -> str:
    """One line of text for any value: numbers short, lists joined, objects as k: v."""
    if isinstance(value, bool) or value is None:
        out = "" if value is None else str(value)
    elif isinstance(value, float):
        out = f"{value:.3g}"
    elif isinstance(value, list):
        out = ", ".join(text(v) for v in value)
    elif isinstance(value, dict):
        out = ", ".join(f"{k}: {text(v)}" for k, v in value.items())
    else:
        out = str(value)
    out = " ".join(out.split())
    return out if limit is None or len(out) <= limit else out[:limit - 1] + "…"


def lookup(result: dict[str, Any], column: str) -> Any:
    """A result field; `a.b` reads inside nested objects."""
    value: Any = result
    for part in column.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _last(column: str) -> str:
    return column.rsplit(".", 1)[-1]


@dataclass
class VoteView:
    model: str
    value: str
    reason: str
    cached: bool
    latency_ms: int
    error: str
    logs: list[str]


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
    logs: list[str]
    cells: list[str]                              # the configured columns, for the markdown table
    result: dict[str, Any]
    links: dict[str, str] = field(default_factory=dict)    # column -> URL (a trace in the tracing UI)

    @property
    def search_text(self) -> str:
        parts = [self.verdict, self.reason, self.error, *self.flags, *(v for _, v in self.inputs),
                 *(f"{j.verdict} {j.reason}" for j in self.juries)]
        return " ".join(parts).lower()


@dataclass
class ReportView:
    title: str
    pipeline: str
    assessment: str
    count_by: str | None
    total: int
    errors: int
    counts: list[tuple[str, int, str]]            # verdict, count, status
    rates: list[tuple[str, float, int | None]]
    measures: list[tuple[str, str]]
    notes: dict[str, list[str]]                   # summary_errors, run_warnings, hints
    models: list[list[str]]
    juries: list[tuple[str, str]]
    columns: list[str]
    items: list[ItemView] = field(default_factory=list)


def columns_for(results: list[dict[str, Any]], configured: list[str] | None) -> list[str]:
    if configured:
        return [c for c in configured if c != "index"]
    seen: list[str] = []
    for result in results:
        seen += [k for k, v in result.items()
                 if k not in seen and k not in ("index", "item_key", "warnings") and not isinstance(v, (dict, list))]
    if any("error" in r for r in results) and "error" not in seen:
        seen.append("error")
    return seen


def read_logs(folder: Path | None) -> dict[int, dict[str, list[str]]]:
    """item -> model -> its call log files, in call order."""
    found: dict[int, dict[str, list[str]]] = {}
    if folder is None or not folder.is_dir():
        return found
    for name in sorted(os.listdir(folder)):
        match = LOG_NAME.match(name)
        if match:
            found.setdefault(int(match["item"]), {}).setdefault(match["model"], []).append(name)
    return found


def _juries(value: Any, where: str, field_name: str, logs: Callable[[str], list[str]]) -> list[JuryView]:
    if not isinstance(value, dict):
        return []
    votes = value.get("votes")
    if isinstance(votes, list) and votes and all(isinstance(v, dict) and "model" in v for v in votes):
        return [JuryView(where, text(value.get(field_name)), text(value.get("reason")), value.get("valid_votes"),
                         [_vote(v, logs) for v in votes])]
    found = []
    for key, inner in value.items():
        found += _juries(inner, f"{where}.{key}" if where else key, field_name, logs)
    return found


def _vote(vote: dict[str, Any], logs: Callable[[str], list[str]]) -> VoteView:
    answer: dict[str, Any] = vote["answer"] if isinstance(vote.get("answer"), dict) else {}
    reason = next((text(answer[n]) for n in REASON_NAMES if answer.get(n)), "")
    return VoteView(str(vote["model"]), text(vote.get("value")), reason, bool(vote.get("cached")),
                    int(vote.get("latency_ms") or 0), text(vote.get("error")), logs(str(vote["model"])))


def _flags(result: dict[str, Any]) -> list[str]:
    flags: list[str] = []
    for key, value in result.items():
        if key.endswith("flags") and isinstance(value, list):
            flags += [str(v) for v in value]
    return flags


def status_of(verdict: str, error: str, passed: bool | None) -> str:
    """pass (green), fail (red), warn (amber: neither, e.g. a hung jury) or error."""
    if error:
        return "error"
    if passed is True or (passed is None and GOOD.match(verdict)):
        return "pass"
    return "fail" if BAD.search(verdict) else "warn"


def item_label(result: dict[str, Any], columns: list[str] | None) -> str:
    """`item 3: notes.txt, 12`: the index and the first configured key inputs."""
    keys = [text(lookup(result, c), 60) for c in (columns or [])[:3]]
    keys = [k for k in keys if k]
    return f"item {result.get('index')}" + (f": {', '.join(keys)}" if keys else "")


def _trace_links(result: dict[str, Any], trace_url: str | None) -> dict[str, str]:
    """The item's trace in the tracing UI, when the run knows its address (summary.tracing.trace_url)."""
    trace_id = result.get("mlflow_trace_id")
    return {"mlflow_trace_id": trace_url.replace("{trace_id}", str(trace_id))} if trace_url and trace_id else {}


def build_item(result: dict[str, Any], columns: list[str], count_by: str | None,
               passed: Callable[[dict[str, Any]], bool | None], logs: dict[int, dict[str, list[str]]],
               trace_url: str | None = None) -> ItemView:
    index = int(result.get("index", 0))
    verdict = text(lookup(result, count_by)) if count_by else ""
    error = text(next((result[n] for n in ERROR_NAMES if result.get(n)), ""))
    item_logs = logs.get(index, {})
    log_names = sorted(name for names in item_logs.values() for name in names)
    juries = _juries(result, "", count_by or "verdict", lambda model: item_logs.get(model, []))
    reason_cols = [c for c in columns if _last(c) in REASON_NAMES]
    reason = next((text(lookup(result, c)) for c in reason_cols if lookup(result, c)), "")
    if not reason:
        reason = next((text(result[n]) for n in REASON_NAMES if result.get(n)), "") or \
            next((j.reason for j in juries if j.reason), "")
    skip = {count_by, *ERROR_NAMES, *reason_cols}
    inputs = [(_last(c), text(lookup(result, c))) for c in columns if c not in skip and lookup(result, c) is not None]
    overridden = next((j.verdict for j in juries if j.verdict and verdict and j.verdict != verdict), "")
    return ItemView(index, status_of(verdict, error, passed(result)), verdict, inputs, reason, _flags(result), error,
                    [text(w) for w in result.get("warnings") or []], juries, overridden, log_names,
                    [text(lookup(result, c), 300) for c in columns], result, _trace_links(result, trace_url))


def build_view(summary: dict[str, Any], results: list[dict[str, Any]], configured: list[str] | None = None,
               assessment_key: str = "assessment", passed: Callable[[dict[str, Any]], bool | None] | None = None,
               logs_dir: Path | None = None) -> ReportView:
    count_by = summary.get("count_by")
    columns = columns_for(results, configured)
    logs = read_logs(logs_dir)
    trace_url = (summary.get("tracing") or {}).get("trace_url") if isinstance(summary.get("tracing"), dict) else None
    items = [build_item(r, columns, count_by, passed or (lambda _: None), logs, trace_url) for r in results]
    status: dict[str, str] = {}
    for item in items:
        status.setdefault(item.verdict, item.status)
    counts = [(str(k), int(v), status.get(str(k), "warn"))
              for k, v in sorted((summary.get("counts") or {}).items(), key=lambda kv: -kv[1])]
    rate_names = [k for k in summary if f"{k}_count" in summary]
    rates = [(k, float(summary[k]), summary.get(f"{k}_count")) for k in rate_names]
    hidden = SUMMARY_SECTIONS | set(rate_names) | {f"{k}_count" for k in rate_names} | {assessment_key}
    measures = [(k, text(v, 200)) for k, v in summary.items() if k not in hidden and not (k == "partial" and not v)]
    models = [[name, str(s.get("calls", 0)), str(s.get("cache_hits", 0)), str(s.get("failures", 0)),
               str(s.get("total_tokens", 0)), f"${s.get('cost', 0.0):.4f}"]
              for name, s in (summary.get("models") or {}).items()]
    juries = [(step, f"{info.get('items')} item(s); pairwise agreement {text(info.get('pairwise_agreement')) or '-'}; "
                     f"Fleiss' kappa {text(info.get('fleiss_kappa')) or '-'}")
              for step, info in (summary.get("juries") or {}).items()]
    notes = {kind: [text(n) for n in summary[kind]] if isinstance(summary.get(kind), list) else []
             for kind in ("summary_errors", "run_warnings", "hints")}
    return ReportView(f"{summary.get('pipeline', 'run')}: report", str(summary.get("pipeline", "")),
                      text(summary.get(assessment_key)), count_by, int(summary.get("total", len(results))),
                      int(summary.get("errors", 0)), counts, rates, measures, notes, models, juries, columns, items)


def result_json(result: dict[str, Any]) -> str:
    """Compact JSON: json's C encoder does not indent, and its Python one took a fifth of a
    cached run's report; the page indents a result when it is opened."""
    return json.dumps(result, ensure_ascii=False, default=str)
