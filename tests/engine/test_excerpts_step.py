"""The `excerpts` step: candidates checked against the text by the quote matcher, the failures
re-asked (the re-ask sees `excerpts.rejected`) until all pass or the re-asks run out; what
each element found, how often it was re-asked, and the calls it made (`llm_calls` too)."""

from __future__ import annotations

import json

import pytest

from helpers import run, write_json
from runner.testing import Reply

TEXT = "The trial gave 40 mg once daily. The primary endpoint was met."
SCHEMA = {"type": "object", "required": ["found"],
          "properties": {"found": {"type": "object", "additionalProperties": {
              "type": "array", "items": {"type": "object", "required": ["text", "confidence"],
                                         "properties": {"text": {"type": "string"},
                                                        "confidence": {"enum": ["high", "low", "none"]}}}}}}}


@pytest.fixture
def env(scripted_llm):
    return scripted_llm


def pipeline(project, reasks: int = 2) -> object:
    project.schema("found.schema.json", SCHEMA)
    project.prompt("first.j2", "Find excerpts for {{ item.names | join(', ') }} in: {{ item.text }}\n")
    project.prompt("reask.j2", "Re-ask {{ key }} (try {{ excerpts.attempt }}):"
                               "{% for r in excerpts.rejected %} [{{ r.text }}: {{ r.reason }}]{% endfor %}\n")
    return project.pipeline(f"""
        version: 1
        name: ex
        models:
          m: {{model: scripted/m}}
        steps:
          - {{id: first, uses: llm, with: {{model: m, prompt: first.j2, output_schema: found.schema.json}}}}
          - id: evidence
            uses: excerpts
            with:
              items: "{{{{ item.names }}}}"
              as: key
              key: "{{{{ key }}}}"
              found: "{{{{ steps.first.output.found.get(key) }}}}"
              text: "{{{{ item.text }}}}"
              reasks: {reasks}
              max: 2
              steps:
                - {{id: again, uses: llm, with: {{model: m, prompt: reask.j2, output_schema: found.schema.json}}}}
              reasked: "{{{{ steps.again.output.found.get(key) }}}}"
        output:
          evidence: "{{{{ steps.evidence }}}}"
          reask_calls: "{{{{ steps.evidence.calls }}}}"
          calls: "{{{{ llm_calls }}}}"
        """)


def found(**by_key):
    return Reply(json.dumps({"found": {k: [{"text": t, "confidence": c} for t, c in v] for k, v in by_key.items()}}))


def test_failures_are_reasked_with_their_reasons_until_they_pass(project, env):
    env.script(found(dose=[("40 mg once daily", "high"), ("80 mg twice", "low")],
                     endpoint=[("The primary endpoint was met", "high")]), contains="Find excerpts")
    env.script(found(dose=[("gave 40 mg", "high")]), contains="Re-ask dose (try 2)")
    items = write_json(project.root / "in.json", [{"text": TEXT, "names": ["dose", "endpoint"]}])
    result = run(pipeline(project), items).results[0]
    dose, endpoint = result["evidence"]
    assert dose["key"] == "dose" and dose["retries"] == 1
    assert [e["text"] for e in dose["excerpts"]] == ["40 mg once daily", "gave 40 mg"]
    assert [r["text"] for r in dose["rejected"]] == ["80 mg twice"]
    assert endpoint == {"key": "endpoint", "retries": 0, "rejected": [],
                        "excerpts": [{"text": "The primary endpoint was met", "confidence": "high",
                                      "similarity_score": 1.0}]}
    (reask,) = env.calls(contains="Re-ask")
    assert "[80 mg twice: " in reask.prompt                      # the re-ask is told what failed and why
    assert (result["reask_calls"], result["calls"]) == (1, 2)     # the item's calls: the first ask and one re-ask


def test_reasks_stop_at_their_limit_and_abstentions_are_not_checked(project, env):
    env.script(found(dose=[("nothing like it", "high")], endpoint=[("", "none")]), contains="Find excerpts")
    env.script(found(dose=[("still not there", "high")]), contains="Re-ask dose")
    items = write_json(project.root / "in.json", [{"text": TEXT, "names": ["dose", "endpoint"]}])
    dose, endpoint = run(pipeline(project, reasks=2), items).results[0]["evidence"]
    assert dose["retries"] == 2 and dose["excerpts"] == [] and len(dose["rejected"]) == 3
    assert endpoint == {"key": "endpoint", "retries": 0, "excerpts": [], "rejected": []}
    assert [c.prompt.split(":")[0] for c in env.calls(contains="Re-ask")] == ["Re-ask dose (try 2)",
                                                                              "Re-ask dose (try 3)"]


def test_no_reasks_means_one_check(project, env):
    env.script(found(dose=[("nothing like it", "high")]), contains="Find excerpts")
    items = write_json(project.root / "in.json", [{"text": TEXT, "names": ["dose"]}])
    (dose,) = run(pipeline(project, reasks=0), items).results[0]["evidence"]
    assert (dose["retries"], dose["excerpts"], len(dose["rejected"])) == (0, [], 1)
    assert env.calls(contains="Re-ask") == []


def test_candidates_that_are_not_a_list_are_the_items_error_with_where(project, env):
    env.script(found(), contains="Find excerpts")
    path = pipeline(project)
    path.write_text(path.read_text(encoding="utf-8").replace(
        'found: "{{ steps.first.output.found.get(key) }}"', 'found: "{{ 5 }}"'), encoding="utf-8")
    items = write_json(project.root / "in.json", [{"text": TEXT, "names": ["dose"]}])
    (result,) = run(path, items).results
    assert "with.found" in result["error"] and "expected a list of excerpts, got int" in result["error"]
