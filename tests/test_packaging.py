"""The runner's own schemas ship inside the package, and the editor schema is current."""

from __future__ import annotations

from pathlib import Path

from runner.checks.json_schema import SCHEMA_ROOT, step_schema_names
from runner.pipeline.editor_schema import render_editor_schema

REPO = Path(__file__).resolve().parent.parent


def test_editor_schema_is_generated_from_the_package_schemas():
    current = (REPO / "schemas" / "pipeline.schema.json").read_text(encoding="utf-8")
    assert current == render_editor_schema(), \
        "schemas/pipeline.schema.json is stale: run `python -m runner.pipeline.editor_schema`"


def test_runner_schemas_are_package_data():
    assert (SCHEMA_ROOT / "pipeline.schema.json").is_file()
    assert str(SCHEMA_ROOT).startswith(str(REPO / "runner"))
    assert {"jury", "llm", "read_lines", "search"} <= set(step_schema_names())
    assert not (REPO / "schemas" / "steps").exists()     # pipeline-owned schemas only at the root
