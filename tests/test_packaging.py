"""The runner's own schemas ship inside the package, and the editor schema is current."""

from __future__ import annotations

import subprocess
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


def test_the_two_set_up_commands_work_pasted_one_after_the_other_in_one_shell(tmp_path: Path):
    """README.md's two set-up commands, as a user pastes them into one shell: the second
    starts in the folder the first started in (a `cd` of the first left the shell in the
    example's folder, where `pip install -e '.[test]'` finds no project). python3, pip,
    runner and the venv are stand-ins; the shell's own `cd`, `&&` and `( )` are real."""
    readme = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    commands = [line.strip() for line in readme[:20] if line.startswith("    python3 -m venv")]
    assert len(commands) == 2, "README.md keeps exactly two set-up commands at the top"
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "activate").write_text("", encoding="utf-8")
    (tmp_path / "examples" / "citation_judge").mkdir(parents=True)
    stubs = "python3() { :; }; pip() { test -f pyproject.toml; }; runner() { :; }; python() { :; }"
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    script = "\n".join([stubs, commands[0], commands[1] + " && pwd"])
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path)
