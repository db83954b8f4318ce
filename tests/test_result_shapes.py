"""What a step returns is part of its contract: validate checks `steps.X.FIELD` against
each step type's result schema, and stays quiet where the shape depends on the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.errors import ConfigError
from runner.loader import load_pipeline

REPO = Path(__file__).resolve().parent.parent
SCORE = {"type": "object", "properties": {"score": {"type": "integer"}, "reason": {"type": "string"}}}


def problems(project, text: str) -> list[str]:
    project.prompt("ask.j2", "Rate {{ item.x }}\n")
    project.schema("score.schema.json", SCORE)
    try:
        load_pipeline(project.pipeline(text))
    except ConfigError as exc:
        return [p.message for p in exc.problems]
    return []


HEAD = """
    version: 1
    name: x
    models: {m: {model: openai/x}}
    steps:
"""


@pytest.mark.parametrize("step,read", [
    ("{id: a, uses: llm, with: {model: m, prompt: ask.j2, output_schema: score.schema.json}}", "a.output.score"),
    ("{id: a, uses: llm, with: {model: m, prompt: ask.j2, output_schema: score.schema.json}}", "a.latency_ms"),
    ("{id: a, uses: jury, with: {models: [m], prompt: ask.j2, output_schema: score.schema.json, "
     "vote: {field: score}}}", "a.votes"),
    ("{id: a, uses: read_lines, with: {root: d, file: f, start: 1}}", "a.cited_text"),
    ("{id: a, uses: quote_match, with: {quote: q, text: t}}", "a.matched_text"),
    ("{id: a, uses: read_table, with: {root: d, file: f}}", "a.total_rows"),
    ("{id: a, uses: search, with: {query: q, provider: local}}", "a.results"),
    ("{id: a, uses: decide, with: {rules: [{when: 'true', verdict: A}, {label: B}]}}", "a.label"),
    ("{id: a, uses: loop, with: {max: 2, steps: [{id: b, uses: compute, with: {v: 1}}]}}", "a.last.b.v"),
    # open shapes: decided at run time, never reported
    ("{id: a, uses: llm, with: {model: m, prompt: ask.j2, output_schema: '{{ item.schema }}'}}", "a.output.any"),
    ("{id: a, uses: llm, with: {model: m, prompt: ask.j2, json: true}}", "a.output.any"),
    ("{id: a, uses: jury, with: {models: [m], prompt: ask.j2, json: true, vote: {field: v}}}", "a.anything"),
    ("{id: a, uses: compute, on_error: continue, with: {v: 1}}", "a.error"),
    ("{id: a, uses: compute, on_error: default, default: {failed: true}, with: {v: 1}}", "a.failed"),
    ("{id: a, uses: compute, on_error: default, default: '{{ item }}', with: {v: 1}}", "a.whatever"),
    ("{id: a, uses: compute, with: {v: 1}}", "a.get('v')"),
    ("{id: a, uses: foreach, with: {items: [1], as: n, steps: [{id: b, uses: compute, with: {v: 1}}]}}",
     "a.anything"),
])
def test_reads_that_validate(project, step, read):
    assert problems(project, HEAD + f"      - {step}\n    output: {{r: \"{{{{ steps.{read} }}}}\"}}\n") == []


@pytest.mark.parametrize("step,read,message", [
    ("{id: a, uses: llm, with: {model: m, prompt: ask.j2, output_schema: score.schema.json}}", "a.output.scor",
     "steps.a.output.scor: steps.a.output has no field 'scor'. Did you mean 'score'?"),
    ("{id: a, uses: compute, with: {v: 1}}", "a.error",
     "steps.a.error: step 'a' has no field 'error' (its fields: v)"),
    ("{id: a, uses: fail, with: {message: stop}}", "a.message",
     "steps.a.message: step 'a' has no field 'message' (its fields: none)"),
    ("{id: a, uses: loop, with: {max: 2, steps: [{id: b, uses: compute, with: {v: 1}}]}}", "a.last.b.w",
     "steps.a.last.b.w: steps.a.last.b has no field 'w' (its fields: v)"),
    ("{id: a, uses: decide, with: {rules: [{verdict: A}]}}", "a['verdit']",
     "steps.a.verdit: step 'a' has no field 'verdit'. Did you mean 'verdict'?"),
])
def test_reads_that_fail(project, step, read, message):
    assert problems(project, HEAD + f"      - {step}\n    output: {{r: \"{{{{ steps.{read} }}}}\"}}\n") == [message]


def test_vote_field_is_checked_only_against_a_schema_file(project):
    jury = "{id: a, uses: jury, with: {models: [m], prompt: ask.j2, output_schema: %s, vote: {field: verdict}}}"
    assert problems(project, HEAD + "      - " + jury % "score.schema.json" + "\n") == [
        "'verdict' is not a property of the answer schema 'score.schema.json' (its properties: reason, score)"]
    assert problems(project, HEAD + "      - " + jury % "'{{ item.schema }}'" + "\n") == []


def test_shipped_pipelines_validate(monkeypatch):
    monkeypatch.chdir(REPO)
    for path in sorted((REPO / "pipelines").glob("*.yaml")):
        assert load_pipeline(path).steps
