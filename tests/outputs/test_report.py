"""The report's view, as text and as a page: verdict status, a jury overruled by later rules,
votes with their calls' prompts and answers, run warnings, and trace links."""

from __future__ import annotations

import json

import pytest

from runner.outputs.report_format import text
from runner.outputs.report_html import render_html
from runner.outputs.report_md import render_report
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


def call(item: int, n: int, model: str, prompt: str, answer: str | None, error: str | None = None) -> str:
    return json.dumps({"item": item, "call": f"{item}.{n}", "step": "jury", "model": model, "model_id": f"openai/{model}",
                       "messages": [{"role": "user", "content": prompt}], "answer": answer, "error": error})


def view(tmp_path):
    calls = tmp_path / "calls.jsonl"
    calls.write_text("\n".join([call(1, 1, "a", "Is <one> valid?", '{"verdict": "VALID"}'),
                                call(2, 1, "a", "Is two valid?", '{"verdict": "VALID"}'),
                                call(1, 2, "b", "Is <one> valid?", None, "HTTP 500"),
                                call(9, 1, "a", "not listed", "-")]) + "\n")
    return build_view(SUMMARY, RESULTS, ["claim", "verdict", "mlflow_trace_id", "error"], passed=lambda r: r.get("ok"),
                      calls_file=calls)


def test_statuses_overrides_and_calls(tmp_path):
    items = view(tmp_path).items
    assert [i.status for i in items] == ["pass", "fail", "warn", "error"]
    assert items[1].overridden == "VALID" and items[0].overridden == ""
    assert items[1].flags == ["changed_number"]
    votes = items[0].juries[0].votes
    assert [[c.call for c in v.calls] for v in votes] == [["1.1"], ["1.2"]]
    assert votes[0].calls[0].prompt == "Is <one> valid?" and votes[0].calls[0].response == '{"verdict": "VALID"}'
    assert votes[1].calls[0].response == "ERROR: HTTP 500"
    assert votes[0].reason == "fits" and votes[1].error == "HTTP 500"
    assert [c.call for c in items[1].calls] == ["2.1"] and items[2].calls == []


def test_markdown_has_the_page_content(tmp_path):
    text = render_report(view(tmp_path))
    assert "> **Warning:** jury 'jury' seats 2 of the 3 models it names" in text
    assert "| ok_rate | 25.0% (1/4) |" in text
    assert "| 1 | one | VALID | [tr-1](http://mlflow:5000/#/traces?selectedEvaluationId=tr-1) |  |  |" in text
    assert "- final verdict QUOTE_NOT_FOUND overrides the jury's VALID" in text
    assert "  - b (12 ms): error: HTTP 500 (call 1.2)" in text
    assert "- LLM calls: 2 in calls.jsonl (`runner calls <run folder> --item 1` prints them)" in text


def test_page_is_self_contained_and_shows_each_votes_prompt_and_answer(tmp_path):
    page = render_html(view(tmp_path))
    assert '<a href="http://mlflow:5000/#/traces?selectedEvaluationId=tr-1">tr-1</a>' in page
    assert '<button class="chip badge fail" data-verdict="QUOTE_NOT_FOUND" data-count="1"' in page
    assert "jury: VALID, overruled by the pipeline's rules" in page
    assert page.count("<pre>Is &lt;one&gt; valid?</pre>") == 1 and "<pre>ERROR: HTTP 500</pre>" in page   # one prompt a jury
    assert "not listed" not in page and "llm_logs" not in page
    assert "<script src" not in page and "<link" not in page and "@import" not in page


class ResultsFile:
    """A reader over results.jsonl, as the streaming engine hands results to the reports:
    iterable again and again, never a list; counts how often it was read."""

    def __init__(self, path):
        self.path, self.passes = path, 0

    def __iter__(self):
        self.passes += 1
        with self.path.open(encoding="utf-8") as lines:
            for line in lines:
                yield json.loads(line)


def big_run(tmp_path, n: int, failing_every: int = 7):
    path = tmp_path / "results.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for index in range(1, n + 1):
            verdict = "INVALID" if index % failing_every == 0 else "VALID"
            out.write(json.dumps({"index": index, "claim": f"claim {index}", "verdict": verdict,
                                  "ok": verdict == "VALID"}) + "\n")
    failing = n // failing_every
    summary = {"pipeline": "big", "total": n, "errors": 0, "count_by": "verdict",
               "counts": {"VALID": n - failing, "INVALID": failing}}
    return summary, ResultsFile(path), failing


def test_a_big_run_keeps_counts_of_all_and_rows_for_review_first(tmp_path):
    summary, results, failing = big_run(tmp_path, 5000)
    view = build_view(summary, results, None, passed=lambda r: r["ok"], limit=1000)
    assert results.passes == 1                                      # read once, never held as a list
    assert len(view.items) == 1000 and view.total == 5000 and view.review == failing == 714
    listed = [item.index for item in view.items]
    assert listed == sorted(listed)
    assert {i.index for i in view.items if i.status == "fail"} == {n for n in range(7, 5001, 7)}
    assert [i.index for i in view.items if i.status == "pass"][:3] == [1, 2, 3]
    assert view.counts == [("VALID", 4286, "pass"), ("INVALID", 714, "fail")]

    text = render_report(view)
    rows = [line for line in text.split("## Items")[1].splitlines() if line.startswith("| ") and "index" not in line]
    assert len(rows) == 200 and all("INVALID" in row for row in rows)        # review items take the 200 rows
    assert ("200 of 5000 items listed, those that need review first (714 need review in all); 4800 more not "
            "listed: every result is in results.jsonl (`runner view` browses them all).") in text
    assert "| INVALID | 714 | fail |" in text

    page = render_html(view)
    assert page.count('<tbody class="item"') == 1000 and 'data-total="5000"' in page
    assert "1000 of 5000 items listed here, those that need review first (714 need review in all" in page
    assert "all 5000</button>" in page and "INVALID 714</button>" in page
    assert "every result is in results.jsonl (<code>runner view</code> browses them all)" in page


def test_a_generator_of_results_is_enough():
    results = ({"index": n, "verdict": "VALID" if n % 2 else "INVALID", "note": f"n{n}"} for n in range(1, 301))
    view = build_view({"pipeline": "g", "total": 300, "errors": 0}, results, None, limit=50,
                      passed=lambda r: r["verdict"] == "VALID")
    assert view.columns == ["verdict", "note"] and len(view.items) == 50 and view.total == 300
    assert view.counts == [("pass", 150, "pass"), ("fail", 150, "fail")]      # no count_by: by status


def test_huge_results_still_make_a_page_under_15_mb():
    claim, reason = "word " * 12_000, "because " * 2_500                    # 60 KB and 20 KB per item
    results = ({"index": n, "verdict": "INVALID" if n % 3 == 0 else "VALID", "claim": claim, "reason": reason,
                "blob": "x" * 100_000} for n in range(1, 1501))
    summary = {"pipeline": "huge", "total": 1500, "errors": 0, "count_by": "verdict",
               "counts": {"VALID": 1000, "INVALID": 500}}
    view = build_view(summary, results, ["claim", "verdict", "reason"], passed=lambda r: r["verdict"] == "VALID")
    page = render_html(view)
    assert len(page.encode()) < 15_000_000
    listed = page.count('<tbody class="item"')
    assert 50 < listed < 1000 and f"{listed} of 1500 items listed here" in page
    assert page.count('data-verdict="INVALID"') == listed + 1        # every listed row needs review (+ its chip)
    assert "(cut at 50000 characters: the whole result is in results.jsonl)" in page
    assert len(render_report(view).encode()) < 2_000_000


def test_a_small_run_lists_every_item_in_order(tmp_path):
    summary, results, _ = big_run(tmp_path, 30)
    view = build_view(summary, results, ["claim", "verdict"], passed=lambda r: r["ok"])
    assert [i.index for i in view.items] == list(range(1, 31)) and view.unlisted == 0
    assert "more not listed" not in render_report(view) and 'id="unlisted"' not in render_html(view)


def test_interrupted_and_partial_runs_say_how_much_of_the_plan_they_hold(tmp_path):
    summary = {"pipeline": "va", "total": 159, "planned": 300, "interrupted": True, "errors": 0, "count_by": "verdict",
               "counts": {"undecided": 159}, "overall_assessment": "Evidence for all 159 statement(s) was mixed."}
    results = [{"index": n, "verdict": "undecided"} for n in range(1, 160)]
    view = build_view(summary, results, ["verdict"], "overall_assessment")
    text = render_report(view)
    assert text.startswith("# va: report (159 of 300 items, interrupted)\n")
    assert "**Assessment (159 of 300 items, interrupted):** Evidence for all 159 statement(s) was mixed." in text
    assert "| total | 159 of 300 |" in text and "| planned |" not in text and "| interrupted |" not in text
    page = render_html(view)
    assert "<h1>va: report (159 of 300 items, interrupted)</h1>" in page
    assert "<strong>Assessment (159 of 300 items, interrupted):</strong>" in page
    assert "<div class=card><b>159 of 300</b><span>items</span></div>" in page

    partial = build_view({**summary, "interrupted": False, "partial": True}, results, ["verdict"])
    assert "(159 of 300 items, partial run)" in render_report(partial)
    limited = build_view({**summary, "interrupted": False, "partial": True, "planned": 159, "input_items": 1200},
                         results, ["verdict"])       # --limit 159: of the input's items, as the run's line says
    assert "(159 of 1200 items, partial run)" in render_report(limited)
    unknown = build_view({**summary, "planned": None}, results, ["verdict"])       # no planned count recorded
    assert "# va: report (159 items, interrupted: the number planned is not recorded)" in render_report(unknown)
    complete = build_view({**summary, "interrupted": False, "planned": 159}, results, ["verdict"])
    assert render_report(complete).startswith("# va: report\n") and "| total | 159 |" in render_report(complete)


def test_numbers_and_booleans_read_as_people_write_them():
    summary = {"pipeline": "p", "total": 3, "errors": 0, "count_by": "verify_result",
               "counts": {"True": 1, "False": 1, "None": 1}, "mean": 0.45499999999999996, "share": 2.0}
    results = [{"index": 1, "verify_result": True, "score": 0.45499999999999996},
               {"index": 2, "verify_result": False, "score": 12345.678},
               {"index": 3, "verify_result": None, "score": None}]
    view = build_view(summary, results, ["verify_result", "score"])
    text, page = render_report(view), render_html(view)
    assert view.counts == [("yes", 1, "pass"), ("no", 1, "fail"), ("none", 1, "warn")]
    assert "| mean | 0.455 |" in text and "| share | 2 |" in text
    assert "| 1 | yes | 0.455 |" in text and "| 2 | no | 12346 |" in text and "| 3 |  |  |" in text
    for python in ("True", "False", "None", "0.45499999999999996"):
        assert python not in text and python not in page.split("<pre>")[0]
    assert 'data-verdict="yes"' in page and '<span class="badge pass">yes</span>' in page


def test_markdown_carries_no_raw_html_or_script_links():
    hostile = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "[click](javascript:alert(1))",
               "![x](javascript:alert(2))", "<javascript:alert(3)>"]
    results = [{"index": n, "claim": claim, "verdict": "VALID\v" if n == 1 else "VALID",
                "jury": {"verdict": "VALID", "reason": claim, "valid_votes": 1,
                         "votes": [{"model": "m", "value": "VALID", "answer": {"reason": claim}}]}}
               for n, claim in enumerate(hostile, 1)]
    summary = {"pipeline": "<b>p</b>", "total": 5, "errors": 0, "count_by": "verdict",
               "counts": {"VALID": 4, "VALID\v": 1}, "assessment": "<script>x()</script>",
               "tracing": {"trace_url": "javascript:alert('{trace_id}')"}}
    text = render_report(build_view(summary, [{**r, "mlflow_trace_id": "t"} for r in results],
                                    ["claim", "verdict", "mlflow_trace_id"]))
    from markdown_it import MarkdownIt
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(text)    # a permissive viewer
    for raw in ("<script", "<img", "<b>", "javascript:alert(1)\"", 'href="javascript', 'src="javascript'):
        assert raw not in rendered, raw
    assert "<a " not in rendered                                   # no link at all: the trace URL is not http(s)
    assert "| VALID | 4 |" in text and "| VALID\\\\x0b | 1 |" in text      # two keys stay two, visibly
    assert "\v" not in text


def test_the_run_line_keeps_a_control_character_visible(project, cli):
    path = project.pipeline("""
        version: 1
        name: t
        steps: [{id: s, uses: compute, with: {v: "{{ item.v }}"}}]
        output: {verdict: "{{ steps.s.v }}"}
        summary: {count_by: verdict}
        """)
    source = project.root / "in.json"
    source.write_text(json.dumps([{"v": "VALID"}, {"v": "VALID\v"}, {"v": True}]))
    result = cli("run", str(path), "--input", str(source), "--out", "out", "--quiet")
    assert result.exit_code == 0, result.stderr
    assert "3 item(s) (VALID: 1, VALID\\x0b: 1, yes: 1)" in result.stdout
    assert "| VALID\\\\x0b | 1 |" in (project.root / "out" / "report.md").read_text()


@pytest.mark.parametrize("value, limit, expected", [
    ("a plain line", None, "a plain line"), ("two  spaces", None, "two spaces"), (" leading", None, "leading"),
    ("tab\there", None, "tab here"), ("no-break\xa0space", None, "no-break space"),
    ("line\u2028separator", None, "line\\u2028separator"), ("VALID\v", None, "VALID\\x0b"), ("x" * 5, 3, "xx…"),
    ("ab  " * 1000, 5, "ab a…"), ("\v" * 100, 5, "\\x0b…"),            # long: cut from its start alone
    ("a" + " " * 1000 + "bbbbbb", 5, "a bb…"), ("a" + " " * 1000 + "b", 5, "a b"),      # its start folds short
])
def test_a_text_cell_is_one_line_with_controls_made_visible(value, limit, expected):
    assert text(value, limit) == expected


@pytest.mark.parametrize("order", [[2, 0, 1], [0, 2, 1]], ids=["failing PASS first", "passing PASS first"])
def test_a_verdict_the_pass_rule_splits_shows_each_status_and_a_rate_named_pass_when_is_not_the_rule(
        project, cli, order):
    """The counts table gave a verdict the status of its first item (`PASS | 2 | warn` or
    `| pass`, by input order), and a summary rate named `pass_when` replaced the rule in the
    reports only (FAIL showed green where junit failed it)."""
    path = project.pipeline("""
        version: 1
        name: split
        input: {adapter: jsonl}
        steps: [{id: s, uses: compute, with: {v: "{{ item.v }}", n: "{{ item.n }}"}}]
        output: {verdict: "{{ steps.s.v }}", n: "{{ steps.s.n }}"}
        summary:
          count_by: verdict
          pass_when: "result.verdict == 'PASS' and result.n > 1"
          rates: {pass_when: "result.verdict == 'FAIL'"}
        """)
    rows = [{"v": "PASS", "n": 2}, {"v": "FAIL", "n": 0}, {"v": "PASS", "n": 0}]
    (project.root / "in.jsonl").write_text("".join(json.dumps(rows[i]) + "\n" for i in order))
    assert cli("run", str(path), "--input", "in.jsonl", "--out", "out", "--format", "junit").exit_code == 0
    report = (project.root / "out" / "report.md").read_text()
    assert "| PASS | 2 | pass 1, warn 1 |" in report
    assert "| FAIL | 1 | fail |" in report
    assert 'failures="2"' in (project.root / "out" / "junit.xml").read_text()
