"""The report's view, as text and as a page: verdict status, a jury overruled by later rules,
votes with their call logs, run warnings, and trace links."""

from __future__ import annotations

from runner.outputs.report import render_report
from runner.outputs.report_html import render_html
from runner.outputs.report_view import build_view

VOTES = [{"model": "a", "value": "VALID", "answer": {"verdict": "VALID", "reason": "fits"}, "error": None,
          "cached": True, "latency_ms": 0},
         {"model": "b", "value": None, "answer": None, "error": "HTTP 500", "cached": False, "latency_ms": 12}]
RESULTS = [
    {"index": 1, "verdict": "VALID", "claim": "one", "jury": {"verdict": "VALID", "reason": "Consensus", "votes": VOTES,
                                                            "valid_votes": 1}, "ok": True, "mlflow_trace_id": "tr-1"},
    {"index": 2, "verdict": "QUOTE_NOT_FOUND", "claim": "two", "quote_flags": ["changed_number"],
     "jury": {"verdict": "VALID", "reason": "Consensus", "votes": VOTES, "valid_votes": 1}, "ok": False},
    {"index": 3, "verdict": "HUNG_JURY", "claim": "three", "ok": False},
    {"index": 4, "error": "FILE_NOT_FOUND: gone", "claim": "four"},
]
SUMMARY = {"pipeline": "p", "total": 4, "errors": 1, "count_by": "verdict",
           "counts": {"VALID": 1, "QUOTE_NOT_FOUND": 1, "HUNG_JURY": 1, "ERROR": 1}, "ok_rate": 0.25, "ok_rate_count": 1,
           "run_warnings": ["jury 'jury' seats 2 of the 3 models it names"],
           "tracing": {"trace_url": "http://mlflow:5000/#/traces?selectedEvaluationId={trace_id}"}}


def view(tmp_path):
    logs = tmp_path / "llm_logs"
    logs.mkdir()
    for name in ("a_0001_item1.txt", "b_0001_item1.txt", "a_0002_item2.txt"):
        (logs / name).write_text("=== PROMPT ===\n")
    return build_view(SUMMARY, RESULTS, ["claim", "verdict", "mlflow_trace_id", "error"], passed=lambda r: r.get("ok"),
                      logs_dir=logs)


def test_statuses_overrides_and_logs(tmp_path):
    items = view(tmp_path).items
    assert [i.status for i in items] == ["pass", "fail", "warn", "error"]
    assert items[1].overridden == "VALID" and items[0].overridden == ""
    assert items[1].flags == ["changed_number"]
    assert [v.logs for v in items[0].juries[0].votes] == [["a_0001_item1.txt"], ["b_0001_item1.txt"]]
    assert items[0].juries[0].votes[0].reason == "fits" and items[0].juries[0].votes[1].error == "HTTP 500"


def test_markdown_has_the_page_content(tmp_path):
    text = render_report(view(tmp_path))
    assert "> **Warning:** jury 'jury' seats 2 of the 3 models it names" in text
    assert "| ok_rate | 25.0% (1/4) |" in text
    assert "| 1 | one | VALID | [tr-1](http://mlflow:5000/#/traces?selectedEvaluationId=tr-1) |  |  |" in text
    assert "- final verdict QUOTE_NOT_FOUND overrides the jury's VALID" in text
    assert "  - b (12 ms): error: HTTP 500 [b_0001_item1.txt](llm_logs/b_0001_item1.txt)" in text


def test_page_is_self_contained_and_links_traces(tmp_path):
    page = render_html(view(tmp_path))
    assert '<a href="http://mlflow:5000/#/traces?selectedEvaluationId=tr-1">tr-1</a>' in page
    assert '<button class="chip badge fail" data-verdict="QUOTE_NOT_FOUND"' in page
    assert "jury: VALID, overruled by the pipeline's rules" in page
    assert 'href="llm_logs/a_0001_item1.txt"' in page
    assert "<script src" not in page and "<link" not in page and "@import" not in page
