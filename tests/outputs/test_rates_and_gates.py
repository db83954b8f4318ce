"""Issue 62: rates with their denominators (finding 1) and gates that fail closed, through
`runner init`'s own judge: 8 items, 5 pass, 2 fail, 1 whose call fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from runner.testing import Reply, ScriptedModel

ITEMS = "id,question,answer\n" + "".join(f"{n},question {n},answer {n}\n" for n in range(1, 9))
SCORES = {1: 1, 2: 1, 3: 0.9, 4: 0.8, 5: 1, 6: 0.1, 7: 0.2}       # item 8: HTTP 400
RUN = ["--input", "items.csv", "--model", "judge=scripted/judge", "--quiet"]


def script(model: ScriptedModel, failing: set[int]) -> None:
    model.reset()
    for n in range(1, 9):
        if n in failing or n not in SCORES:
            model.script(Reply(status=400, raw_body='{"error": {"message": "bad request"}}'), contains=f"answer {n}\n")
        else:
            model.script(Reply(json.dumps({"score": SCORES[n], "reason": "checked"})), contains=f"answer {n}\n")


@pytest.fixture
def judge(project, cli, scripted_llm):
    """`runner init qa`'s judge and an input of 8 items, the last of which errors."""
    assert cli("init", "qa").exit_code == 0
    (project.root / "items.csv").write_text(ITEMS, encoding="utf-8")
    script(scripted_llm, set())
    return project


def run_qa(cli, out: str, *flags: str):
    return cli("run", "pipelines/qa.yaml", *RUN, "--out", out, "--no-cache", *flags)


def test_62_1_one_errored_item_keeps_the_rate_with_its_denominator(judge, cli):
    ran = run_qa(cli, "out")
    assert ran.exit_code == 0, ran.output
    summary = judge.summary()
    assert summary["pass_rate"] == 0.7143 and summary["pass_rate_count"] == 5 and "summary_errors" not in summary
    assert summary["rates"]["pass_rate"] == {"value": 0.7143, "numerator": 5, "denominator": 7, "left_out": 1,
                                             "left_out_by": {"errored": 1}, "errored_counted": 0}
    shown = "71.4% (5/7; 1 left out: 1 errored)"
    assert shown in (judge.root / "out" / "report.md").read_text()
    assert shown in (judge.root / "out" / "report.html").read_text()
    from runner.view.app import create_app
    runs = Path(judge.root / "reports")
    (runs / "qa" / "items").mkdir(parents=True)
    (judge.root / "out").rename(runs / "qa" / "items" / "r1")
    page = TestClient(create_app(runs, token="t"), base_url="http://127.0.0.1").get("/").text
    assert "pass_rate 71.4% (5/7; 1 left out: 1 errored)" in page


def test_62_1_a_rate_no_item_can_give_is_null_with_its_reason(judge, cli, scripted_llm):
    script(scripted_llm, set(range(1, 9)))
    run_qa(cli, "out")
    rate = judge.summary()["rates"]["pass_rate"]
    assert judge.summary()["pass_rate"] is None and rate["value"] is None
    assert (rate["denominator"], rate["left_out_by"]) == (0, {"errored": 8})
    assert rate["reason"] == "no item to compute it over: every item was left out (8 errored)"
    assert "n/a (0 counted; 8 left out: 8 errored)" in (judge.root / "out" / "report.md").read_text()


def test_62_2_fail_under_fails_closed_on_items_left_out_of_its_rate(judge, cli):
    gated = run_qa(cli, "out", "--fail-under", "0.5")
    assert gated.exit_code == 1
    assert ("pass_rate 0.7143 (5/7; 1 left out: 1 errored): 1 of 8 item(s) left out of it, more than the gate "
            "allows (a rate gate allows none unless --max-errors says how many); --fail-under 0.5 not met"
            in gated.stderr)
    allowed = run_qa(cli, "out2", "--fail-under", "0.5", "--max-errors", "1")
    assert allowed.exit_code == 0 and "pass_rate 0.7143 (5/7; 1 left out: 1 errored) meets --fail-under 0.5" \
        in allowed.stderr
    low = run_qa(cli, "out3", "--fail-under", "0.8", "--max-errors", "1")
    assert low.exit_code == 1 and "is below --fail-under 0.8" in low.stderr


def test_62_2_an_errored_item_a_rate_can_read_is_counted_and_the_gate_still_sees_it(judge, cli):
    yaml = judge.root / "pipelines" / "qa.yaml"          # a rate that is true on an errored result
    yaml.write_text(yaml.read_text().replace("result.verdict == 'PASS'",
                                             "result.verdict is not defined or result.verdict != 'FAIL'"))
    gated = run_qa(cli, "out", "--fail-under", "0.5")
    assert gated.exit_code == 1
    assert judge.summary("out")["rates"]["pass_rate"] == {
        "value": 0.75, "numerator": 6, "denominator": 8, "left_out": 0, "left_out_by": {}, "errored_counted": 1}
    assert ("pass_rate 0.75 (6/8, 1 of them errored): 1 of 8 item(s) errored, more than the gate allows (a rate "
            "gate allows none unless --max-errors says how many); --fail-under 0.5 not met") in gated.stderr
    allowed = run_qa(cli, "out2", "--fail-under", "0.5", "--max-errors", "1")
    assert allowed.exit_code == 0, allowed.stderr
    assert "pass_rate 0.75 (6/8, 1 of them errored) meets --fail-under 0.5" in allowed.stderr
    assert "75.0% (6/8, 1 of them errored)" in (judge.root / "out" / "report.md").read_text()


def test_62_2_fail_under_fails_closed_on_a_rate_that_is_undefined(judge, cli):
    yaml = judge.root / "pipelines" / "qa.yaml"
    yaml.write_text(yaml.read_text().replace("result.verdict == 'PASS'", "result.score / 0 > 1"))
    gated = run_qa(cli, "out", "--fail-under", "0.5", "--max-errors", "all")
    assert gated.exit_code == 1
    assert "pass_rate is n/a (no item to compute it over: every item was left out (7 undefined, 1 errored)" \
        in gated.stderr and "has nothing to check" in gated.stderr


def test_62_2_diff_max_drop_counts_a_vanished_or_null_rate_as_a_drop(judge, cli, scripted_llm):
    run_qa(cli, "before")
    run_qa(cli, "same")
    assert cli("diff", "before", "same", "--max-drop", "0.02").exit_code == 0
    script(scripted_llm, set(range(1, 9)))
    run_qa(cli, "after")
    became_null = cli("diff", "before", "after", "--max-drop", "0.02")
    assert became_null.exit_code == 1
    assert "pass_rate became n/a (no item to compute it over" in became_null.stderr
    assert "pass_rate: 0.7143 (5/7; 1 left out: 1 errored) -> n/a (0 counted; 8 left out: 8 errored)" \
        in became_null.stdout
    summary_file = judge.root / "after" / "summary.json"
    summary = json.loads(summary_file.read_text())
    for key in ("pass_rate", "pass_rate_count", "rates"):            # as main wrote it: the rate dropped
        summary.pop(key)
    summary_file.write_text(json.dumps(summary))
    vanished = cli("diff", "before", "after", "--max-drop", "0.02")
    assert vanished.exit_code == 1 and "pass_rate vanished (it was 0.7143 (5/7; 1 left out: 1 errored))" \
        in vanished.stderr
    assert "pass_rate: 0.7143 (5/7; 1 left out: 1 errored) -> missing" in vanished.stdout


def test_62_2_fail_under_kappa_fails_closed_saying_why_kappa_is_undefined(judge, cli):
    run_qa(cli, "out")
    (judge.root / "labels.csv").write_text("id,label\n" + "".join(f"{n},PASS\n" for n in range(1, 6)))
    gated = cli("eval", "out", "--labels", "labels.csv", "--key", "id", "--truth", "label", "--fail-under-kappa", "0.5")
    assert gated.exit_code == 1
    assert ("kappa is n/a (undefined: the labels and the verdicts are each all one and the same class; over 5 of 5 "
            "label(s)): --fail-under-kappa 0.5 has nothing to check") in gated.stderr
    # its line said `kappa None n/a (5 labels)`: Python's None, and a reason (too few labels) that was not it
    assert "kappa n/a (the labels and the verdicts are each all one and the same class), macro F1" in gated.stdout
    assert "None" not in gated.stdout


def test_62_2_a_baseline_written_before_errored_counted_is_no_drop(judge, cli):
    """Review finding: a baseline summary.json from before rates counted their errored items reads
    as 0 errored, so `diff --max-drop` failed on an unchanged rate the first time after an upgrade."""
    yaml = judge.root / "pipelines" / "qa.yaml"
    yaml.write_text(yaml.read_text().replace("result.verdict == 'PASS'",
                                             "result.verdict is not defined or result.verdict != 'FAIL'"))
    run_qa(cli, "before")
    run_qa(cli, "after")
    summary_file = judge.root / "before" / "summary.json"
    summary = json.loads(summary_file.read_text())
    summary["rates"]["pass_rate"].pop("errored_counted")              # as the earlier version wrote it
    summary_file.write_text(json.dumps(summary))
    same = cli("diff", "before", "after", "--max-drop", "0.02")
    assert same.exit_code == 0, same.output
    assert "pass_rate: 0.75 (6/8) -> 0.75 (6/8, 1 of them errored)" in same.stdout


def test_a_gate_compares_the_rate_itself_not_its_rounded_value(judge, cli):
    """5/7 is 0.714285..., shown 0.7143: `--fail-under 0.71429` passed on the rounded value."""
    below = run_qa(cli, "out", "--fail-under", "0.71429", "--max-errors", "1")
    assert below.exit_code == 1 and "pass_rate 0.7143 (5/7; 1 left out: 1 errored) is below --fail-under 0.71429" \
        in below.output, below.output
    assert run_qa(cli, "out2", "--fail-under", "0.71428", "--max-errors", "1").exit_code == 0


def test_a_rate_equal_to_its_threshold_meets_it():
    """(review) The exact comparison took 0.8 as the float nearest it, which 8/10 is below."""
    from runner.calibration.diff import rate_drops
    from runner.engine.health import MaxErrors, rate_gate
    entry = {"value": 0.8, "numerator": 8, "denominator": 10, "left_out": 0, "errored_counted": 0}
    assert rate_gate({"rates": {"r": entry}}, "r", 0.8, MaxErrors()) == (True, "r 0.8 (8/10) meets --fail-under 0.8")
    drop = {"rate_details": {"r": [{**entry, "value": 1.0, "numerator": 10}, {**entry, "value": 0.7, "numerator": 7}]}}
    assert rate_drops(drop, 0.3) == [] and rate_drops(drop, 0.29) != []
