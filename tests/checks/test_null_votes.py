"""Issue 62 finding 2: a mean jury none of whose jurors answered is an error of the item with
the jurors' own causes, not a TypeError of the step that reads its null vote; validate warns
where a rule compares a vote that can be null without handling it."""

from __future__ import annotations

import json

import pytest

from helpers import write_json
from runner.testing import Reply

JUDGE = """
    version: 1
    name: meanjury
    models:
      a: {{model: scripted/judge-a, retries: 0}}
      b: {{model: scripted/judge-b, retries: 0}}
      c: {{model: scripted/judge-c, retries: 0}}
    steps:
      - id: jury
        uses: jury
        {on_error}
        with:
          models: [a, b, c]
          prompt: score.j2
          output_schema: s.schema.json
          vote: {{field: score, method: mean}}
      - id: decide
        uses: compute
        with: {{passed: "{{{{ steps.jury.score >= 0.5 }}}}"}}
    output:
      verdict: "{{{{ 'PASS' if steps.decide.passed else 'FAIL' }}}}"
    summary:
      count_by: verdict
      rates: {{pass_rate: "result.verdict == 'PASS'"}}
    """


@pytest.fixture
def judge(project, scripted_llm):
    project.prompt("score.j2", "Score item {{ item.n }}\n")
    project.schema("s.schema.json", {"type": "object", "required": ["score"],
                                     "properties": {"score": {"type": "number"}, "reason": {"type": "string"}}})
    write_json(project.root / "in.json", [{"n": n} for n in range(1, 9)])
    return lambda on_error="": project.pipeline(JUDGE.format(on_error=on_error))


def test_62_3_a_mean_vote_no_juror_answered_errors_the_item_with_the_jurors_causes(project, cli, judge,
                                                                                  scripted_llm):
    scripted_llm.script(Reply(status=400, raw_body='{"error": {"message": "model not found"}}'), model="judge-a")
    scripted_llm.script(Reply(status=400, raw_body='{"error": {"message": "model not found"}}'), model="judge-b")
    scripted_llm.script(Reply(status=500, raw_body='{"error": {"message": "overloaded"}}'), model="judge-c")
    ran = cli("run", str(judge()), "--input", "in.json", "--out", "out", "--quiet")
    assert "TypeError" not in ran.output and "NoneType" not in ran.output
    results, summary = project.results(), project.summary()
    assert all(r["error"].startswith("step 'jury': no juror answered, so the mean vote is null: model 'a' "
                                     "(scripted/judge-a)") for r in results), results
    assert all("HTTP 400: model not found" in r["error"] and "HTTP 500: overloaded" in r["error"] for r in results)
    [group] = summary["error_groups"]
    assert group["count"] == 8 and "no juror answered" in group["error"] and "'NoneType'" not in group["error"]
    assert "8/8 items: step 'jury': no juror answered, so the mean vote is null" in ran.stderr
    assert summary["rates"]["pass_rate"]["left_out_by"] == {"errored": 8}


def test_62_3_on_error_continue_keeps_the_null_vote_for_a_rule_that_handles_it(project, judge, scripted_llm, cli):
    scripted_llm.script(Reply(status=400, raw_body='{"error": {"message": "model not found"}}'))
    path = judge("on_error: continue")
    path.write_text(path.read_text().replace("steps.jury.score >= 0.5", "steps.jury.score is not none and "
                                                                       "steps.jury.score >= 0.5"))
    checked = cli("validate", str(path))
    assert checked.exit_code == 0 and "can be null" not in checked.output
    cli("run", str(path), "--input", "in.json", "--out", "out", "--quiet")
    assert [r["verdict"] for r in project.results()] == ["FAIL"] * 8


def test_62_3_validate_warns_where_a_rule_compares_a_vote_that_can_be_null(project, judge, cli):
    checked = cli("validate", str(judge("on_error: continue")))
    assert checked.exit_code == 0
    assert ("steps.jury.score can be null (a mean vote no juror answered, kept by on_error: continue) and "
            "is compared without handling it") in checked.output


def test_62_3_numbers_still_vote(project, judge, scripted_llm, cli):
    scripted_llm.script(Reply(json.dumps({"score": 0.7, "reason": "ok"})))
    cli("run", str(judge()), "--input", "in.json", "--out", "out", "--quiet")
    assert [r["verdict"] for r in project.results()] == ["PASS"] * 8


def test_62_4_krippendorffs_interval_alpha_matches_the_published_example():
    """Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", its example of 4
    observers, 12 units and missing values: alpha (interval) = 0.849; a unit with one value
    is not pairable. Kept as running sums, it gives the same."""
    from runner.engine.voting import IntervalAgreement
    data = {"A": [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
            "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
            "C": [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
            "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None]}
    rows = [{seat: values[unit] for seat, values in data.items() if values[unit] is not None} for unit in range(12)]
    whole = IntervalAgreement()
    for row in rows:
        whole.add(row)
    assert whole.alpha() == 0.8491
    assert whole.pairwise()["A~B"] == round(1 / 9, 4)       # A and B both voted on 9 units, one apart by 1


def test_62_4_a_mean_jury_reports_interval_alpha_not_exact_equality(project, judge, scripted_llm):
    from helpers import run
    for n in range(1, 9):
        base = n / 10
        scripted_llm.script(Reply(json.dumps({"score": base, "reason": "a"})), model="judge-a", contains=f"item {n}\n")
        scripted_llm.script(Reply(json.dumps({"score": base + 0.1, "reason": "b"})), model="judge-b",
                            contains=f"item {n}\n")
        scripted_llm.script(Reply(json.dumps({"score": base + 0.05, "reason": "c"})), model="judge-c",
                            contains=f"item {n}\n")
    outcome = run(judge(), project.root / "in.json")
    jury = outcome.summary["juries"]["jury"]
    assert jury["measure"] == "Krippendorff's alpha (interval)" and "fleiss_kappa" not in jury
    assert jury["krippendorff_alpha"] > 0.85
    assert jury["pairwise_mean_abs_difference"]["a~b"] == 0.1
    report = (project.root / "out" / "report.md").read_text()
    assert "Krippendorff's alpha (interval)" in report and "Fleiss" not in report


def test_62_5_a_mean_jurys_reason_keeps_each_jurors_reason_and_rounds_for_display_only(project, judge, scripted_llm):
    from helpers import run
    for seat, score in (("a", 0.1), ("b", 0.3), ("c", 0.8)):
        scripted_llm.script(Reply(json.dumps({"score": score, "reason": f"{seat} checked"})), model=f"judge-{seat}")
    path = judge()
    path.write_text(path.read_text().replace("\noutput:\n", "\noutput:\n  score: \"{{ steps.jury.score }}\"\n"
                                                                 "  reason: \"{{ steps.jury.reason }}\"\n"))
    result = run(path, project.root / "in.json").results[0]
    assert result["score"] == 0.39999999999999997       # the value is kept whole (statistics.fmean)
    assert result["reason"] == "Mean of 3 vote(s): 0.4 (spread 0.7). a 0.1: a checked; b 0.3: b checked; c 0.8: c checked"
