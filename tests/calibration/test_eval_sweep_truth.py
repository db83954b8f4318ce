"""eval and sweep refuse to mislead: predictions and labels that share no value, per-juror
scores that are missing for a reason, intervals too small to compute, calls that always
fail, and best settings that tie."""

from __future__ import annotations

import json

import pytest

from fakellm import Reply
from helpers import write_json

VOTES = [True, True, False, True, False, True]
LABELS = ["FAITHFUL", "FAITHFUL", "UNFAITHFUL", "UNFAITHFUL", "UNFAITHFUL", "FAITHFUL"]


@pytest.fixture
def boolean_run(project):
    """A run folder of a summary judge whose jurors vote booleans and whose verdict is a word."""
    run = project.root / "run"
    run.mkdir()
    lines = []
    for index, vote in enumerate(VOTES, 1):
        verdict = "FAITHFUL" if vote else "UNFAITHFUL"
        lines.append(json.dumps({"index": index, "id": index, "faithful": vote, "verdict": verdict,
                                 "jury": {"votes": [{"model": m, "value": vote} for m in ("a", "b", "c")]}}))
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    write_json(run / "summary.json", {"pipeline": "summaries", "total": len(VOTES), "errors": 0,
                                      "count_by": "verdict"})
    write_json(project.root / "labels.json", [{"id": n, "label": label} for n, label in enumerate(LABELS, 1)])
    return run


def test_eval_refuses_predictions_and_labels_that_share_no_value(boolean_run, cli):
    """Finding 3: it printed `accuracy 0.0 ... kappa 0.0 95% CI [0.0, 0.0]`."""
    result = cli("eval", "run", "--labels", "labels.json", "--key", "id", "--truth", "label", "--predicted", "faithful")
    assert result.exit_code == 2, result.output
    assert "faithful" in result.stderr and "false, true" in result.stderr and "FAITHFUL, UNFAITHFUL" in result.stderr
    assert "--positive" in result.stderr
    assert not (boolean_run / "eval.json").exists()
    mapped = cli("eval", "run", "--labels", "labels.json", "--key", "id", "--truth", "label", "--predicted",
                 "faithful", "--positive", "true", "--positive", "FAITHFUL")
    assert mapped.exit_code == 0, mapped.output
    assert "pass/fail: accuracy 0.8333" in mapped.output


def test_eval_says_why_per_juror_scores_are_missing_and_when_an_interval_cannot_be_computed(boolean_run, cli):
    """Finding 3: per-juror scores vanished (`No juror answered (votes)`) though every juror
    answered, and six labels printed `95% CI None`."""
    result = cli("eval", "run", "--labels", "labels.json", "--key", "id", "--truth", "label")
    assert result.exit_code == 0, result.output
    assert "95% CI n/a (6 labels)" in result.output and "None" not in result.output
    [line] = [line for line in result.output.splitlines() if "per-juror" in line]
    assert "false, true" in line and "FAITHFUL, UNFAITHFUL" in line, line
    page = (boolean_run / "eval.md").read_text()
    assert "No juror answered" not in page and "n/a (6 labels)" in page


def judged_once(project, fake_llm, monkeypatch, cli, failing):
    """A one-model judge run once over 8 items, the calls of `failing` answered with a 500."""
    monkeypatch.setenv("FAKE_URL", fake_llm.url)
    project.schema("s.schema.json", {"type": "object", "required": ["score"],
                                     "properties": {"score": {"type": "number"}}})
    project.prompt("q.j2", "Score item {{ item.id }}\n")
    path = project.pipeline("""
        version: 1
        name: thresholds
        env: [FAKE_URL]
        params: {cutoff: 0.5}
        models:
          m: {model: openai/m, api_base: "{{ env.FAKE_URL }}", backoff: 0.01, retries: 0, limits: {concurrency: 8}}
        steps:
          - {id: ask, uses: llm, with: {model: m, prompt: q.j2, output_schema: s.schema.json}}
          - id: verdict
            uses: decide
            with: {rules: [{when: "steps.ask.output.score >= params.cutoff", verdict: PASS}, {verdict: FAIL}]}
        output: {id: "{{ item.id }}", verdict: "{{ steps.verdict.verdict }}"}
        summary: {count_by: verdict}
        """)
    scores = {1: 0.9, 2: 0.8, 3: 0.1, 4: 0.7, 5: 0.2, 6: 0.9, 7: 0.3, 8: 0.6}
    for n in failing:
        fake_llm.script(Reply(status=500), contains=f"item {n}\n")
    for n, score in scores.items():
        fake_llm.answer_json({"score": score}, contains=f"item {n}\n")
    write_json(project.root / "items.json", [{"id": n} for n in scores])
    write_json(project.root / "labels.json", [{"id": n, "label": "PASS" if s >= 0.5 else "FAIL"}
                                              for n, s in scores.items()])
    first = cli("run", str(path), "--input", "items.json", "--quiet")
    assert first.exit_code == (3 if set(failing) == set(scores) else 0), first.output
    fake_llm.requests.clear()
    return path


def sweep(cli, path, *extra):
    return cli("sweep", str(path), "--input", "items.json", "--labels", "labels.json", "--key", "id", "--truth",
               "label", "--grid", "params.cutoff=0.4,0.5,0.55,0.65,0.75", "--out", "sweep", *extra)


def test_a_sweep_counts_calls_that_failed_as_errors_at_every_point_without_sending_them(project, fake_llm,
                                                                                       monkeypatch, cli):
    """Finding 8: every grid point said `needs 3 call(s): run with --allow-calls`."""
    path = judged_once(project, fake_llm, monkeypatch, cli, failing=(3, 5, 7))
    result = sweep(cli, path)
    assert result.exit_code == 0, result.output
    assert "needs" not in result.output and fake_llm.requests == []
    report = json.loads((project.root / "sweep" / "sweep.json").read_text())
    assert [(s["status"], s["errors"]) for s in report["settings"]] == [("cached", 3)] * 5
    assert "3 call(s) that failed" in result.stderr and "made by 3 item(s) there" in result.stderr
    assert "3 item(s) errored at each setting, from any cause" in result.stderr
    assert report["failed_before"]["items"] == 3


def test_a_sweep_sends_each_missing_call_once_and_names_ties(project, fake_llm, monkeypatch, cli):
    """Finding 8: with --allow-calls the failing calls were sent again at each of the 5 points,
    and the best value was picked without a word about the others that scored the same."""
    path = judged_once(project, fake_llm, monkeypatch, cli, failing=(3, 5, 7))
    result = sweep(cli, path, "--allow-calls")
    assert result.exit_code == 0, result.output
    assert len(fake_llm.requests) == 3                    # once per sweep, not once per setting
    report = json.loads((project.root / "sweep" / "sweep.json").read_text())
    assert [s["errors"] for s in report["settings"]] == [3] * 5
    best = report["best"]
    assert best["set_line"] == "--set params.cutoff=0.4"
    assert best["ties"] == ["--set params.cutoff=0.5", "--set params.cutoff=0.55"]
    assert "tied with --set params.cutoff=0.5, --set params.cutoff=0.55" in result.output


def test_62_6_a_sweep_counts_only_what_it_saw_and_names_the_cache_that_answered(project, fake_llm, monkeypatch, cli):
    """Finding 7: after a run whose every call failed, the cache (filled by an earlier run)
    answers each call of the sweep: no item errors, and the sweep says so, naming the cache."""
    path = judged_once(project, fake_llm, monkeypatch, cli, failing=())
    fake_llm.reset()
    fake_llm.script(Reply(status=500))
    dead = cli("run", str(path), "--input", "items.json", "--quiet", "--no-cache")
    assert "errors: 8" in dead.output
    result = sweep(cli, path)
    report = json.loads((project.root / "sweep" / "sweep.json").read_text())
    assert [s["errors"] for s in report["settings"]] == [0] * 5
    assert "count as errors at every setting" not in result.stderr
    assert ("8 call(s) that failed in " in result.stderr and "were not sent again, and none was needed: the cache at "
            f"{project.root / 'cache'} answered every call this sweep made (no item errored at any setting)"
            in result.stderr)


def test_a_sweep_counts_and_exits_as_the_run_of_each_setting(project, fake_llm, monkeypatch, cli):
    """Issue 61: a sweep counted with its own item loop (every item errored: counts {'None': 8})
    and exited 0 where `runner run` of each setting exits 3. Each setting is now that run:
    summary.json's counts, errors and rates, and the run's exit code, naming the settings."""
    path = judged_once(project, fake_llm, monkeypatch, cli, failing=range(1, 9))
    result = cli("sweep", str(path), "--input", "items.json", "--labels", "labels.json", "--key", "id", "--truth",
                 "label", "--grid", "params.cutoff=0.4,0.6", "--out", "sweep")
    assert result.exit_code == 3, result.output
    assert fake_llm.requests == []                     # the calls that failed in the run are not sent again
    report = json.loads((project.root / "sweep" / "sweep.json").read_text())
    assert [(s["status"], s["items"], s["errors"], s["counts"]) for s in report["settings"]] == \
        [("cached", 8, 8, {"ERROR": 8})] * 2
    assert "--set params.cutoff=0.6: run failed: no model answered any call (8 call(s) failed; exit code 3)" \
        in result.stderr
