"""A typed pipeline model (issue 61): `input:`, `summary:` and `memo:` are frozen dataclasses with
their defaults written once, and no code reads them by string key."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from runner.engine.rates import PassRule
from runner.pipeline.loader import load_pipeline
from runner.pipeline.model import ASSESSMENT_KEY, DEFAULT_ADAPTER, InputSpec, MemoSpec, SummarySpec

PACKAGE = Path(__file__).resolve().parents[2] / "runner"
STRING_KEY_READ = re.compile(r"pipeline\.(?:input|summary|memo)(?:\.get\(|\[)")


def test_no_code_reads_a_pipeline_section_by_string_key():
    found = [f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
             for path in sorted(PACKAGE.rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if STRING_KEY_READ.search(line)]
    assert found == [], "\n".join(found)


def test_sections_are_typed_with_their_declared_values(project):
    path = project.pipeline("""
        version: 1
        name: p
        input: {adapter: csv, with: {delimiter: ";"}, explode: rows, parent_as: doc}
        memo: {key: "{{ item.x }}", refresh: [x]}
        steps:
          - {id: c, uses: compute, with: {x: "{{ item.x }}"}}
        output: {x: "{{ steps.c.x }}"}
        summary:
          count_by: x
          rates: {ok: "result.x == 1", also: "result.x > 0"}
          report_columns: [x]
        """)
    pipeline = load_pipeline(path)
    assert pipeline.input == InputSpec(adapter="csv", options={"delimiter": ";"}, explode="rows", parent_as="doc")
    assert pipeline.memo == MemoSpec(key="{{ item.x }}", refresh=("x",))
    assert pipeline.summary.rates == {"ok": "result.x == 1", "also": "result.x > 0"}
    assert (pipeline.summary.count_by, pipeline.summary.report_columns) == ("x", ["x"])
    assert pipeline.summary.assessment_key == ASSESSMENT_KEY
    assert PassRule.of(pipeline.summary) == PassRule("ok", "result.x == 1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        pipeline.summary.count_by = "y"  # type: ignore[misc]


def test_a_pipeline_without_sections_gets_the_defaults(project):
    path = project.pipeline("""
        version: 1
        name: p
        steps:
          - {id: c, uses: compute, with: {x: "{{ item.x }}"}}
        output: {x: "{{ steps.c.x }}"}
        """)
    pipeline = load_pipeline(path)
    assert pipeline.input == InputSpec() and pipeline.input.adapter == DEFAULT_ADAPTER
    assert pipeline.summary == SummarySpec() and pipeline.memo is None
    assert PassRule.of(pipeline.summary) is None


@pytest.mark.parametrize("copy", [None, "not a mapping", {"rates": "neither"}, {}])
def test_a_run_json_copy_of_any_shape_reads_as_no_rule(copy):
    """view and eval read `summary:` back from run.json files of any age."""
    assert PassRule.of(SummarySpec.of(copy)) is None


def test_a_run_json_copy_with_fields_of_the_wrong_type_reads_as_absent():
    """A hand-edited or foreign run.json: `runner view` lists it instead of failing on its copy."""
    spec = SummarySpec.of({"count_by": ["verdict"], "assessment": 5, "pass_when": 3, "reason_field": {}})
    assert (spec.count_by, spec.assessment, spec.pass_when, spec.reason_field) == (None, (), None, None)
    assert SummarySpec.of({"assessment": [{"when": "true", "text": "ok"}, "x"]}).assessment == (
        {"when": "true", "text": "ok"},)


def test_a_run_json_copy_gives_the_pass_rule_it_declared():
    copy = {"pass_when": "result.status != 'red'", "rates": {"green": "result.status == 'green'"}}
    assert PassRule.of(SummarySpec.of(copy)) == PassRule("pass_when", "result.status != 'red'")
