"""Juries that lose seats: the default quorum, the short-jury warning, votes counted,
and numeric juries that never write their failure text into a number."""

from __future__ import annotations

import json

import pytest

from helpers import run, write_json
from runner.testing import Reply

SCORE_SCHEMA = {"type": "object", "required": ["score"], "properties": {"score": {"type": "number"}}}


def score_jury(project, method="median", quorum="", spare_enabled="false", on_error="fail"):
    project.schema("s.schema.json", SCORE_SCHEMA)
    project.prompt("score.j2", "Score item {{ item.n }}\n")
    return project.pipeline(f"""
        version: 1
        name: sj
        models:
          a: {{model: scripted/judge-a, retries: 0}}
          b: {{model: scripted/judge-b, retries: 0}}
          c: {{model: scripted/judge-c, retries: 0}}
          spare: {{model: scripted/judge-off, enabled: {spare_enabled}}}
        steps:
          - id: jury
            uses: jury
            on_error: {on_error}
            with:
              models: [a, b, c, spare]
              prompt: score.j2
              output_schema: s.schema.json
              vote: {{field: score, method: {method}, on_all_failed: LLM_ERROR {quorum}}}
        output:
          score: "{{{{ steps.jury.score }}}}"
          outcome: "{{{{ steps.jury.outcome }}}}"
          valid_votes: "{{{{ steps.jury.valid_votes }}}}"
          seats: "{{{{ steps.jury.seats }}}}"
          reason: "{{{{ steps.jury.reason }}}}"
        """)


@pytest.fixture
def env(scripted_llm):
    return scripted_llm


def test_two_of_three_unreachable_no_longer_passes_on_one_vote(project, env):
    env.script(Reply(json.dumps({"score": 80})), model="judge-a")
    env.script(Reply(status=500), model="judge-b")
    env.script(Reply(status=500), model="judge-c")
    failed = run(score_jury(project), write_json(project.root / "in.json", [{"n": 1}])).results[0]
    assert failed["error"].startswith("step 'jury': Quorum not met: 1 valid vote(s), 2 needed, so the median vote "
                                      "is null: model 'b' (scripted/judge-b)")
    outcome = run(score_jury(project, on_error="continue"), write_json(project.root / "in.json", [{"n": 1}]), out="o2")
    result = outcome.results[0]
    assert result["score"] is None                       # never "LLM_ERROR" in a number field
    assert result["outcome"] == "LLM_ERROR"
    assert result["valid_votes"] == 1 and result["seats"] == 3
    assert result["reason"].startswith("Quorum not met: 1 valid vote(s), 2 needed")


def test_explicit_quorum_one_keeps_the_old_rule(project, env):
    env.script(Reply(json.dumps({"score": 80})), model="judge-a")
    env.script(Reply(status=500), model="judge-b")
    env.script(Reply(status=500), model="judge-c")
    result = run(score_jury(project, quorum=", quorum: 1"), write_json(project.root / "in.json", [{"n": 1}])).results[0]
    assert (result["score"], result["outcome"], result["valid_votes"]) == (80, "decided", 1)
    assert result["reason"] == "Median of 1 vote(s): 80 (spread 0). a 80"


def test_all_failed_median_is_null_with_its_outcome(project, env):
    env.script(Reply(status=500))
    failed = run(score_jury(project), write_json(project.root / "in.json", [{"n": 1}])).results[0]
    assert failed["error"].startswith("step 'jury': no juror answered, so the median vote is null: model 'a'")
    result = run(score_jury(project, on_error="continue"), write_json(project.root / "in.json", [{"n": 1}]),
                 out="o2").results[0]
    assert result["score"] is None and result["outcome"] == "LLM_ERROR" and result["valid_votes"] == 0


def test_short_jury_warns_once_per_run(project, env):
    env.script(Reply(json.dumps({"score": 7})))
    items = write_json(project.root / "in.json", [{"n": n} for n in range(3)])
    outcome = run(score_jury(project), items)
    assert outcome.summary["run_warnings"] == [
        "jury 'jury' seats 3 of the 4 models it names (spare not enabled); "
        "its default quorum is a majority of the seated jurors (2)"]
    assert [r["valid_votes"] for r in outcome.results] == [3, 3, 3]
    full = run(score_jury(project, spare_enabled="true"), items, out="o2")
    assert "run_warnings" not in full.summary and full.results[0]["seats"] == 4
