"""`examples:` on llm and jury steps: prior chat turns, checked at validate, shown by render,
part of the cache key, inherited and overridden through `extends:`."""

from __future__ import annotations

import json
from typing import Any

from helpers import run, write_json
from runner.testing import ScriptedModel

SCHEMA = {"type": "object", "required": ["verdict"],
          "properties": {"verdict": {"enum": ["yes", "no"]}, "reason": {"type": "string"}}}

PIPELINE = """
    version: 1
    name: ex
    models: {m: {model: scripted/m, retries: 0}}
    steps:
      - id: judge
        uses: llm
        with:
          model: m
          prompt: "Claim: {{ item.claim }}"
          output_schema: verdict.schema.json
          examples: {examples}
    output: {verdict: "{{ steps.judge.output.verdict }}"}
    summary: {count_by: verdict}
    """


def _project(project: Any, examples: str) -> Any:
    project.schema("verdict.schema.json", SCHEMA)
    return project.pipeline(PIPELINE.replace("{examples}", examples))


def test_examples_file_become_prior_turns_before_the_item(project: Any, scripted_llm: ScriptedModel) -> None:
    project.file("pipelines/ex.examples.jsonl",
                 json.dumps({"item": {"claim": "sky is green"}, "answer": {"verdict": "no", "reason": "it is blue"},
                             "key": "k1"}) + "\n")
    pipeline = _project(project, "ex.examples.jsonl")
    scripted_llm.answer_json({"verdict": "yes"})
    run(pipeline, write_json(project.root / "in.json", [{"claim": "water is wet"}]))
    [request] = scripted_llm.requests
    assert request.messages == [
        {"role": "user", "content": "Claim: sky is green"},
        {"role": "assistant", "content": json.dumps({"verdict": "no", "reason": "it is blue"})},
        {"role": "user", "content": "Claim: water is wet"}]


def test_inline_examples_are_data_not_templates(project: Any, scripted_llm: ScriptedModel) -> None:
    pipeline = _project(project, "[{item: {claim: '{{ not a template'}, answer: {verdict: 'no'}}]")
    scripted_llm.answer_json({"verdict": "yes"})
    run(pipeline, write_json(project.root / "in.json", [{"claim": "c"}]))
    assert scripted_llm.requests[0].messages[0]["content"] == "Claim: {{ not a template"


def test_an_answer_outside_the_schema_is_refused_at_validate_with_its_place(project: Any, cli: Any) -> None:
    project.file("pipelines/bad.jsonl", json.dumps({"item": {"claim": "a"}, "answer": {"verdict": "no"}}) + "\n"
                 + json.dumps({"item": {"claim": "b"}, "answer": {"verdict": "maybe"}}) + "\n")
    pipeline = _project(project, "bad.jsonl")
    result = cli("validate", str(pipeline))
    assert result.exit_code == 2, result.output
    assert "p.yaml:11:" in result.output and "bad.jsonl line 2" in result.output and "'maybe'" in result.output
    inline = _project(project, "[{item: {claim: a}, answer: {verdict: maybe}}]")
    result = cli("validate", str(inline))
    assert result.exit_code == 2 and "p.yaml:11:" in result.output and "examples[0]" in result.output, result.output
    missing = _project(project, "nowhere.jsonl")
    result = cli("validate", str(missing))
    assert result.exit_code == 2 and "nowhere.jsonl" in result.output and "not found" in result.output


def test_render_shows_the_example_turns(project: Any, cli: Any) -> None:
    pipeline = _project(project, "[{item: {claim: shown example}, answer: {verdict: 'no'}}]")
    write_json(project.root / "in.json", [{"claim": "c"}])
    result = cli("render", str(pipeline), "--input", "in.json")
    assert result.exit_code == 0, result.output
    assert "[user]\nClaim: shown example" in result.output and '[assistant]\n{"verdict": "no"}' in result.output


def test_examples_are_part_of_the_cache_key(project: Any, scripted_llm: ScriptedModel) -> None:
    examples = project.file("pipelines/ex.jsonl", json.dumps({"item": {"claim": "a"}, "answer": {"verdict": "no"}}))
    pipeline = _project(project, "ex.jsonl")
    scripted_llm.answer_json({"verdict": "yes"})
    source = write_json(project.root / "in.json", [{"claim": "c"}])
    run(pipeline, source, out="one")
    run(pipeline, source, out="two")
    assert len(scripted_llm.requests) == 1                      # the same examples: from the cache
    examples.write_text(json.dumps({"item": {"claim": "b"}, "answer": {"verdict": "no"}}), encoding="utf-8")
    run(pipeline, source, out="three")
    assert len(scripted_llm.requests) == 2                      # other examples: another call


def test_a_variant_inherits_and_overrides_examples(project: Any, scripted_llm: ScriptedModel) -> None:
    project.file("pipelines/base.jsonl", json.dumps({"item": {"claim": "base"}, "answer": {"verdict": "no"}}))
    _project(project, "base.jsonl")
    inherits = project.pipeline("version: 1\nextends: p.yaml\n", "inherits.yaml")
    overrides = project.pipeline("version: 1\nextends: p.yaml\nsteps:\n  - id: judge\n    with:\n"
                                 "      examples: [{item: {claim: variant}, answer: {verdict: 'yes'}}]\n",
                                 "overrides.yaml")
    scripted_llm.answer_json({"verdict": "yes"})
    source = write_json(project.root / "in.json", [{"claim": "c"}])
    run(inherits, source, out="a")
    run(overrides, source, out="b")
    assert [r.messages[0]["content"] for r in scripted_llm.requests] == ["Claim: base", "Claim: variant"]


def test_jury_examples_reach_every_juror(project: Any, scripted_llm: ScriptedModel) -> None:
    project.schema("verdict.schema.json", SCHEMA)
    pipeline = project.pipeline("""
        version: 1
        name: jx
        models: {a: {model: scripted/a, retries: 0}, b: {model: scripted/b, retries: 0}}
        steps:
          - id: jury
            uses: jury
            with:
              models: [a, b]
              prompt: "Claim: {{ item.claim }}"
              output_schema: verdict.schema.json
              vote: {field: verdict}
              examples: [{item: {claim: ex}, answer: {verdict: 'no'}}]
        output: {verdict: "{{ steps.jury.verdict }}"}
        """)
    scripted_llm.answer_json({"verdict": "yes"})
    run(pipeline, write_json(project.root / "in.json", [{"claim": "c"}]))
    assert sorted(r.model for r in scripted_llm.requests) == ["a", "b"]
    assert all(r.messages[0]["content"] == "Claim: ex" for r in scripted_llm.requests)


def test_an_examples_file_may_be_named_from_the_project_folder(project: Any, scripted_llm: ScriptedModel) -> None:
    project.file("shots/ex.jsonl", json.dumps({"item": {"claim": "from the root"}, "answer": {"verdict": "no"}}))
    pipeline = _project(project, "shots/ex.jsonl")
    scripted_llm.answer_json({"verdict": "yes"})
    run(pipeline, write_json(project.root / "in.json", [{"claim": "c"}]))
    assert scripted_llm.requests[0].messages[0]["content"] == "Claim: from the root"
