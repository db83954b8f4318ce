"""docs/robustness.md's console examples, run as written: each `$ ` line of a console block in
a fresh copy of the repository's pipelines and examples, its model server (the page's
http://127.0.0.1:8080/v1) being the fake server playing the kinds of juror the page names;
stdout must be what the page shows, run folders' times aside (and paths are as seen from the
folder the command ran in)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jurors import careful, obedient

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "robustness.md"
DOC_URL = "http://127.0.0.1:8080/v1"
BLOCK = re.compile(r"```console\n(.*?)```", re.DOTALL)
STAMP = re.compile(r"\d{8}-\d{6}(-\d{3})?")


def console_blocks(text: str) -> list[list[tuple[str, list[str]]]]:
    """Each console block as (command, the output lines it shows)."""
    found = []
    for block in BLOCK.findall(text):
        steps: list[tuple[str, list[str]]] = []
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            elif steps:
                steps[-1][1].append(line)
        found.append(steps)
    return found


def copy_of_repository(root: Path) -> Path:
    for folder in ("pipelines", "prompts", "schemas", "examples"):
        shutil.copytree(REPO / folder, root / folder)
    (root / "tests").mkdir()
    for helper in ("fakellm.py", "jurors.py"):
        shutil.copy(REPO / "tests" / helper, root / "tests" / helper)
    return root


def run_block(steps: list[tuple[str, list[str]]], root: Path, url: str) -> list[tuple[str, str]]:
    """(command, its stdout) of each step, run from `root` (a `cd` moves for the ones after)."""
    env = {k: v for k, v in os.environ.items() if k not in ("RUNNER_CACHE_DIR", "LOCAL_LLM_BASE_URL")}
    where, outputs = root, []
    for command, _ in steps:
        argv = shlex.split(command.replace(DOC_URL, url))
        if argv[0] == "cd":
            where = where / argv[1]
            outputs.append((command, ""))
            continue
        program = {"runner": [sys.executable, "-m", "runner.cli.app"], "python": [sys.executable]}[argv[0]]
        done = subprocess.run([*program, *argv[1:]], cwd=where, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        outputs.append((command, done.stdout.replace(f"{where}/", "")))      # paths as seen from where it ran
    return outputs


def test_every_console_example_prints_what_the_page_shows(fake_llm, tmp_path):
    fake_llm.script(careful, model="careful")
    fake_llm.script(obedient, model="obedient")
    blocks = console_blocks(DOC.read_text(encoding="utf-8"))
    assert len(blocks) == 2
    for number, steps in enumerate(blocks):
        root = copy_of_repository(tmp_path / f"block{number}")
        for (command, shown), (_, printed) in zip(steps, run_block(steps, root, fake_llm.url)):
            assert STAMP.sub("TIME", printed.rstrip("\n")) == STAMP.sub("TIME", "\n".join(shown)), command


@pytest.mark.parametrize("name", ["fakellm.py", "jurors.py"])
def test_the_page_names_the_test_servers_it_runs_on(name):
    assert f"tests/{name}" in DOC.read_text(encoding="utf-8")
