"""What a step returns is part of its contract: validate checks `steps.X.FIELD` against
each step type's result schema, and stays quiet where the shape depends on the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import run
from runner.checks.result_shapes import OPEN, ShapeContext, closed, fields_of, union
from runner.errors import ConfigError
from runner.pipeline.loader import load_pipeline
from runner.pipeline.step_catalog import step_info

REPO = Path(__file__).resolve().parents[2]
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
    ("{id: a, uses: decide, with: {rules: [{when: 'item.x', verdict: A}, {label: B}]}}", "a.label"),
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


def conforms(value, shape, where: str) -> list[str]:
    """Keys a result has that its declared (closed) schema does not list."""
    known = fields_of(shape)
    if isinstance(value, dict) and known is not None:
        extra = [f"{where}.{k}" for k in value if k not in known]
        return extra + [p for k, v in value.items() if k in known for p in conforms(v, known[k], f"{where}.{k}")]
    if isinstance(value, list) and isinstance(shape, dict) and shape.get("type") == "array":
        return [p for i, v in enumerate(value) for p in conforms(v, shape.get("items"), f"{where}[{i}]")]
    return []


def test_every_step_returns_no_field_its_result_schema_leaves_out(project, scripted_llm):
    """The declared result schemas against real results: a field added to a step's result
    without its schema fails here (validate would reject reads of it)."""
    scripted_llm.script('{"score": 4, "reason": "fine"}')
    project.file("data/f.txt", "one\ntwo\nthree\n")
    project.file("data/t.csv", "a,b\n1,2\n")
    project.prompt("ask.j2", "Rate {{ item.x }}\n")
    project.schema("score.schema.json", SCORE)
    path = project.pipeline("""
        version: 1
        name: x
        models: {m: {model: scripted/m, retries: 0}}
        steps:
          - {id: lines, uses: read_lines, with: {root: data, file: f.txt, start: 2, context: 1}}
          - {id: table, uses: read_table, with: {root: data, file: t.csv}}
          - {id: match, uses: quote_match, with: {quote: two, source: "{{ steps.lines }}"}}
          - {id: found, uses: search, with: {query: two, provider: local, folder: data}}
          - {id: rule, uses: decide, with: {rules: [{when: "item.x == 2", a: 1}, {b: 2}]}}
          - {id: values, uses: compute, with: {v: 1, w: "{{ values.v + 1 }}"}}
          - {id: ask, uses: llm, with: {model: m, prompt: ask.j2, output_schema: score.schema.json}}
          - {id: jury, uses: jury, with: {models: [m], prompt: ask.j2, output_schema: score.schema.json,
                                          vote: {field: score, method: mean}}}
          - {id: each, uses: foreach, with: {items: [1, 2], as: n, steps: [{id: twice, uses: compute,
                                                                           with: {v: "{{ n * 2 }}"}}]}}
          - {id: again, uses: loop, with: {max: 2, until: "loop.index == 2",
                                           steps: [{id: once, uses: compute, with: {i: "{{ loop.index }}"}}]}}
          - {id: broken, uses: fail, on_error: continue, with: {message: stop}}
        output: {all: "{{ steps }}"}
        """)
    (result,) = run(path, records=["x=1"]).results
    assert "error" not in result, result
    pipeline = load_pipeline(path)
    shapes = ShapeContext(pipeline.schemas_dir, lambda steps: {s["id"]: OPEN for s in steps})
    shapes.substeps = lambda steps: {s["id"]: step_info(s["uses"]).result_schema(s.get("with") or {}, shapes)
                                     for s in steps}
    outside = []
    for spec in pipeline.steps:
        shape = step_info(spec.uses).result_schema(spec.args, shapes)
        if spec.on_error == "continue":
            shape = union(shape, closed({"error": {}}))
        assert fields_of(shape) is not None or shape.get("type") == "array", spec.id
        outside += conforms(result["all"][spec.id], shape, spec.id)
    assert outside == []
    assert result["all"]["jury"]["score"] == 4 and result["all"]["broken"] == {"error": "stop"}
