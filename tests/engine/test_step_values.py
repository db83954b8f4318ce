"""What later steps read: a skipped step as the empty value of its result shape (with
`steps.X.skipped`), a failed step's default laid over that empty value, and the LLM calls and
attempts the engine counts for every step that makes them."""

from __future__ import annotations

import json

import pytest

from helpers import run, write_json
from runner.testing import Reply

ANSWER = {"type": "object", "required": ["verdict"],
          "properties": {"verdict": {"type": "string"}, "score": {"type": "number"}, "notes": {"type": "array"},
                         "ok": {"type": "boolean"}, "extra": {"type": "object", "properties": {"n": {"type": "integer"}}}}}


@pytest.fixture
def env(scripted_llm):
    return scripted_llm


def pipeline(project, *, retries=0, repair=0, on_error="fail"):
    project.schema("a.schema.json", ANSWER)
    project.prompt("ask.j2", "Judge item {{ item.n }}\n")
    return project.pipeline(f"""
        version: 1
        name: sv
        models:
          judge: {{model: scripted/judge, retries: {retries}, backoff: 0.01}}
        steps:
          - id: ask
            uses: llm
            if: "item.n > 0"
            on_error: {on_error}
            with: {{model: judge, prompt: ask.j2, output_schema: a.schema.json, repair: {repair}}}
          - id: each
            uses: foreach
            with:
              items: "{{{{ [1, 2] if item.n > 0 else [] }}}}"
              as: k
              steps: [{{id: again, uses: llm, with: {{model: judge, prompt: ask.j2, json: true}}}}]
          - id: none_run
            uses: loop
            if: "false"
            with: {{max: 2, steps: [{{id: x, uses: llm, with: {{model: judge, prompt: ask.j2}}}}]}}
        output:
          skipped: "{{{{ steps.ask.skipped }}}}"
          truthy: "{{{{ true if steps.ask else false }}}}"
          verdict: "{{{{ steps.ask.output.verdict }}}}"
          score: "{{{{ steps.ask.output.score }}}}"
          notes: "{{{{ steps.ask.output.notes }}}}"
          ok: "{{{{ steps.ask.output.ok }}}}"
          n: "{{{{ steps.ask.output.extra.n }}}}"
          calls: "{{{{ steps.ask.calls }}}}"
          attempts: "{{{{ steps.ask.attempts }}}}"
          each_calls: "{{{{ steps.each.calls }}}}"
          loop: "{{{{ [steps.none_run.skipped, steps.none_run.iterations, steps.none_run.history] }}}}"
        """)


def test_a_skipped_step_reads_as_the_empty_value_of_its_shape(project, env):
    results = run(pipeline(project), write_json(project.root / "in.json", [{"n": 0}])).results
    assert results[0] | {"index": 0, "item_key": 0} == {
        "index": 0, "item_key": 0, "skipped": True, "truthy": False, "verdict": "", "score": 0, "notes": [],
        "ok": False, "n": 0, "calls": 0, "attempts": 0, "each_calls": 0, "loop": [True, 0, []]}
    assert env.calls() == []


def test_the_engine_counts_calls_and_attempts(project, env):
    env.script(Reply(status=500), Reply(json.dumps({"verdict": "OK"})), contains="Judge item 1")
    results = run(pipeline(project, retries=2), write_json(project.root / "in.json", [{"n": 1}])).results
    assert results[0]["skipped"] is False and results[0]["truthy"] is True
    assert (results[0]["verdict"], results[0]["calls"], results[0]["attempts"]) == ("OK", 1, 2)
    assert results[0]["each_calls"] == 2


def test_a_reask_to_repair_is_one_more_call_and_a_cached_answer_no_attempt(project, env):
    env.script(Reply("not json"), Reply(json.dumps({"verdict": "OK"})))
    items = write_json(project.root / "in.json", [{"n": 1}])
    first = run(pipeline(project, repair=1), items).results[0]
    assert (first["verdict"], first["calls"], first["attempts"]) == ("OK", 2, 2)
    path = pipeline(project)
    run(path, items)
    again = run(path, items, out="out2").results[0]
    assert (again["verdict"], again["calls"], again["attempts"]) == ("OK", 1, 0)


def test_a_failed_step_counts_its_calls_and_its_default_lies_over_the_empty_value(project, env):
    env.script(Reply(status=500))
    path = pipeline(project, retries=1, on_error="default")
    path.write_text(path.read_text(encoding="utf-8").replace(
        "on_error: default", "on_error: default\n    default: {output: {verdict: FAILED}}"), encoding="utf-8")
    result = run(path, write_json(project.root / "in.json", [{"n": 1}])).results[0]
    assert (result["verdict"], result["score"], result["notes"]) == ("FAILED", 0, [])
    assert (result["calls"], result["attempts"]) == (1, 2)
