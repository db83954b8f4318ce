"""Defaults written once (issue 61): the input adapter's (`"json"`), a jury vote's (`method`,
`on_tie`, `on_all_failed`, `reason_field`: jury.schema.json, where the docs and editors read
them) and the summary's assessment key are each spelled in one place and read from there,
never written again beside a `.get(...)`."""

from __future__ import annotations

import re
from pathlib import Path

from runner.engine.voting import VOTE_DEFAULTS
from runner.pipeline.catalog import step_schema
from runner.pipeline.model import DEFAULT_ADAPTER

PACKAGE = Path(__file__).resolve().parent.parent / "runner"
# a default written again where a key is read: `.get("on_tie", "HUNG_JURY")`, `adapter or "json"`
RESPELLED = re.compile(r'\.get\("(?:adapter|method|on_tie|on_all_failed|reason_field|assessment_key)", ["\d]'
                       r'|"(?:HUNG_JURY|LLM_ERROR)"|adapter\W+or "json"|"adapter": "json"')


def test_no_default_is_spelled_where_it_is_read():
    found = [f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
             for path in sorted(PACKAGE.rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if RESPELLED.search(line)]
    assert found == [], "\n".join(found)


def test_the_vote_defaults_are_the_jury_schemas_and_the_adapter_default_is_json():
    vote = step_schema("jury")["properties"]["vote"]["properties"]
    assert VOTE_DEFAULTS == {name: vote[name]["default"] for name in ("method", "on_tie", "on_all_failed",
                                                                      "reason_field")}
    assert VOTE_DEFAULTS["on_tie"] == "HUNG_JURY" and DEFAULT_ADAPTER == "json"


def test_a_pipeline_without_input_reads_json(project):
    from runner.pipeline.loader import load_pipeline
    path = project.pipeline("""
        version: 1
        name: p
        steps:
          - {id: c, uses: compute, with: {x: "{{ item.x }}"}}
        output: {x: "{{ steps.c.x }}"}
        """)
    assert load_pipeline(path).adapter == DEFAULT_ADAPTER
