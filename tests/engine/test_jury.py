"""The jury step end to end: three jurors on the fake server, limits, agreement."""

from __future__ import annotations

import json

import pytest

import runner.llm.client.limits as limits
from helpers import run, write_json
from runner.testing import Reply

VERDICT_SCHEMA = {"type": "object", "required": ["verdict", "reason"],
                  "properties": {"verdict": {"type": "string"}, "reason": {"type": "string"}}}


MANY = ", limits: {concurrency: 16}"     # the fake server is local: one request at a time unless set


def jury_pipeline(project, limits_b=MANY, limits_c=MANY, quorum=""):
    project.schema("v.schema.json", VERDICT_SCHEMA)
    project.prompt("judge.j2", "Judge claim {{ item.n }}\n")
    return project.pipeline(f"""
        version: 1
        name: j
        models:
          a: {{model: scripted/judge-a, backoff: 0.01, retries: 0 {MANY}}}
          b: {{model: scripted/judge-b, backoff: 0.01, retries: 0 {limits_b}}}
          c: {{model: scripted/judge-c, backoff: 0.01, retries: 0 {limits_c}}}
          spare: {{model: scripted/judge-off, enabled: false}}
        steps:
          - id: jury
            uses: jury
            with:
              models: [a, b, c, spare]
              prompt: judge.j2
              output_schema: v.schema.json
              vote: {{field: verdict, method: majority, on_tie: HUNG_JURY, on_all_failed: LLM_ERROR {quorum}}}
        output:
          verdict: "{{{{ steps.jury.verdict }}}}"
          reason: "{{{{ steps.jury.reason }}}}"
          votes: "{{{{ steps.jury.votes | map(attribute='value') | list }}}}"
          seats: "{{{{ steps.jury.votes | map(attribute='model') | list }}}}"
        summary: {{count_by: verdict}}
        """)


def answer(verdict, reason="because"):
    return json.dumps({"verdict": verdict, "reason": reason})


@pytest.fixture
def env(scripted_llm):
    return scripted_llm


def test_vote_outcomes_on_scripted_jurors(project, env):
    script = {  # item n -> answers of a, b, c (None = the juror fails)
        1: ("VALID", "VALID", "VALID"),
        2: ("VALID", "MISLEADING", "VALID"),
        3: (None, "VALID", "VALID"),
        4: ("VALID", None, "INSUFFICIENT"),
        5: (None, None, None),
    }
    for n, answers in script.items():
        for seat, verdict in zip("abc", answers):
            reply = Reply(status=500) if verdict is None else Reply(answer(verdict, f"{seat} says {verdict}"))
            env.script(reply, model=f"judge-{seat}", contains=f"claim {n}\n")
    items = write_json(project.root / "in.json", [{"n": n} for n in script])
    outcome = run(jury_pipeline(project), items)
    got = {r["index"]: (r["verdict"], r["reason"]) for r in outcome.results}
    assert got[1] == ("VALID", "Consensus (3/3): VALID: a says VALID")
    assert got[2] == ("VALID", "Majority (2/3): VALID: a says VALID")
    assert got[3] == ("VALID", "Consensus (2/2): VALID: b says VALID")
    assert got[4] == ("HUNG_JURY", "Hung jury: 1 VALID, 1 INSUFFICIENT")
    assert got[5][0] == "LLM_ERROR" and got[5][1].startswith("All 3 jurors failed: model 'a' (scripted/judge-a)")
    assert outcome.results[0]["seats"] == ["a", "b", "c"]                  # disabled model takes no seat
    assert outcome.results[3]["votes"] == ["VALID", None, "INSUFFICIENT"]
    assert env.calls(model="judge-off") == []
    juries = outcome.summary["juries"]["jury"]
    assert juries["items"] == 5
    assert juries["pairwise_agreement"] == {"a~b": 0.5, "a~c": 0.6667, "b~c": 0.6667}
    # Each figure says what it is over: the items both seats (every seat, for kappa) voted on.
    assert juries["pairwise_items"] == {"a~b": 2, "a~c": 3, "b~c": 3} and juries["fleiss_kappa_items"] == 2
    report = (outcome.out_dir / "report.md").read_text()
    assert ("| jury | 5 item(s); Fleiss' kappa -0.2 (n 2: items every juror voted on); pairwise agreement "
            "a~b 0.5 (n 2), a~c 0.667 (n 3), b~c 0.667 (n 3) |") in report
    assert outcome.summary["models"]["a"]["failures"] == 2 and outcome.summary["models"]["b"]["calls"] == 5


def test_global_concurrency_is_reached_and_capped(project, env):
    env.script(Reply(answer("VALID"), delay=0.25))
    env.gather = 5
    items = write_json(project.root / "in.json", [{"n": n} for n in range(8)])
    run(jury_pipeline(project), items, llm_concurrency=5)
    assert env.peak_in_flight == 5
    assert len(env.requests) == 24


def _peak(requests):
    events = sorted([(r.started, 1) for r in requests] + [(r.finished, -1) for r in requests])
    peak = current = 0
    for _, delta in events:
        current += delta
        peak = max(peak, current)
    return peak


def test_per_model_concurrency(project, env):
    env.script(Reply(answer("VALID"), delay=0.2))
    items = write_json(project.root / "in.json", [{"n": n} for n in range(6)])
    run(jury_pipeline(project, limits_b=", limits: {concurrency: 1}"), items, llm_concurrency=16)
    assert _peak(env.calls(model="judge-b")) == 1
    assert _peak(env.calls(model="judge-a")) >= 3


def test_requests_per_minute(project, env, monkeypatch):
    """Starts are paced by our own clock (the server's arrival times also carry the loaded
    machine's scheduling delays, so they are checked only as a whole)."""
    window = 0.5
    monkeypatch.setattr(limits, "RATE_WINDOW_SECONDS", window)
    starts: list[float] = []
    wait = limits.RateWindow.wait

    async def recorded(self: limits.RateWindow) -> None:
        await wait(self)
        starts.append(self.starts[-1])

    monkeypatch.setattr(limits.RateWindow, "wait", recorded)
    env.script(Reply(answer("VALID")))
    items = write_json(project.root / "in.json", [{"n": n} for n in range(6)])
    run(jury_pipeline(project, limits_c=", limits: {concurrency: 16, requests_per_minute: 2}"), items)
    assert len(env.calls(model="judge-c")) == 6 == len(starts)
    for i in range(len(starts) - 2):
        assert starts[i + 2] - starts[i] >= window        # never 3 starts in one window
    arrivals = sorted(r.started for r in env.calls(model="judge-c"))
    assert arrivals[-1] - arrivals[0] >= window           # three windows (two spans), less any one delay of scheduling


def test_daily_budget_spent_mid_run_and_kept_across_runs(project, env):
    env.script(Reply(answer("VALID")))
    path = jury_pipeline(project, limits_b=", limits: {requests_per_day: 2}")
    items = write_json(project.root / "in.json", [{"n": n} for n in range(4)])
    outcome = run(path, items, llm_concurrency=1)
    assert len(env.calls(model="judge-b")) == 2
    assert all(r["verdict"] == "VALID" for r in outcome.results)     # the others go on
    exhausted = [r for r in outcome.results if r["votes"][1] is None]
    assert len(exhausted) == 2
    assert outcome.results[3]["reason"] == "Consensus (2/2): VALID: because"
    env.reset()
    env.script(Reply(answer("VALID")))
    again = run(path, write_json(project.root / "in2.json", [{"n": 10}]), out="o2")
    assert env.calls(model="judge-b") == []
    assert again.results[0]["verdict"] == "VALID"


def test_budget_message(project, env):
    env.script(Reply(answer("VALID")))
    path = jury_pipeline(project, limits_b=", limits: {requests_per_day: 0}", quorum=", quorum: 3")
    result = run(path, write_json(project.root / "in.json", [{"n": 1}])).results[0]
    assert result["verdict"] == "LLM_ERROR"
    assert result["reason"] == ("Quorum not met: 2 valid vote(s), 3 needed; first error: "
                                "daily request budget of 0 spent for b")


def test_a_jury_that_misses_its_quorum_for_failed_calls_errors_the_item_everywhere(project, env, cli):
    """One juror answered and two failed: the vote said LLM_ERROR, but the item had no error,
    so `errors: 0` and a rate gate passed on it; a numeric jury errored the same item."""
    env.script(Reply(status=500), model="judge-a", contains="claim 3\n")
    env.script(Reply(answer("VALID")), model="judge-a")
    env.script(Reply(answer("VALID")), model="judge-b", contains="claim 1\n")
    env.script(Reply(answer("VALID")), model="judge-c", contains="claim 1\n")
    env.script(Reply(status=400), model="judge-b")
    env.script(Reply(status=400), model="judge-c")
    write_json(project.root / "in.json", [{"n": 1}, {"n": 2}, {"n": 3}])
    path = jury_pipeline(project)
    result = cli("run", str(path), "--input", "in.json", "--out", "out", "--format", "junit")
    results = project.results(project.root / "out")
    assert [r["verdict"] for r in results] == ["VALID", "LLM_ERROR", "LLM_ERROR"]
    assert results[2]["error"] == (      # no juror answered: each one's cause, not only the last to fail
        "step 'jury': no juror answered: model 'a' (scripted/judge-a) at scripted (provider default): HTTP 500: "
        "scripted status 500; model 'b' (scripted/judge-b) at scripted (provider default): HTTP 400: scripted "
        "status 400; model 'c' (scripted/judge-c) at scripted (provider default): HTTP 400: scripted status 400")
    assert "error" not in results[0] and results[1]["error"] == (
        "step 'jury': quorum not met: 1 valid vote(s), 2 needed: model 'b' (scripted/judge-b) at scripted (provider "
        "default): HTTP 400: scripted status 400; model 'c' (scripted/judge-c) at scripted (provider default): HTTP "
        "400: scripted status 400")     # every cause in seat order, whichever call failed last
    assert project.summary(project.root / "out")["errors"] == 2
    assert 'errors="2"' in (project.root / "out" / "junit.xml").read_text()
    assert "errors: 2" in result.output


def test_eval_of_a_run_whose_every_jury_failed_scores_it_and_fails_as_the_run_did(project, env, cli):
    """(hunt) Every item's jury failed (LLM_ERROR, an error): eval refused, exit 2, with
    "share no value ... e.g. --positive LLM_ERROR", where the run exits 3 and eval should too."""
    env.script(Reply(status=500))
    write_json(project.root / "in.json", [{"n": 1}, {"n": 2}])
    write_json(project.root / "labels.json", [{"index": 1, "label": "VALID"}, {"index": 2, "label": "INVALID"}])
    path = jury_pipeline(project)
    assert cli("run", str(path), "--input", "in.json", "--out", "out", "--quiet").exit_code == 3
    scored = cli("eval", str(path), "--input", "in.json", "--out", "again", "--labels", "labels.json",
                 "--key", "index", "--truth", "label")
    assert scored.exit_code == 3 and "share no value" not in scored.output, scored.output
    assert json.loads((project.root / "again" / "eval.json").read_text())["metrics"]["accuracy"] == 0.0
