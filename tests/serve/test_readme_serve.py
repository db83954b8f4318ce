"""The README's `runner serve` section, executed: each `$ curl ...` line is run in a shell
against a live `runner serve` of a copy of this repository's pipelines (the slide judge's
model a scripted fake server), and its output compared with the README's as JSON, with the
values that differ from run to run (ids, times, hashes, ports) left out."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from serve_fixtures import Process

REPO = Path(__file__).resolve().parents[2]
VOLATILE = {"id", "created_at", "started_at", "ended_at", "stored_at", "reviewed_at", "timestamp", "trace_id",
            "duration_ms", "run", "pipeline_hash", "input", "content_hash"}
README_ADDRESS = "127.0.0.1:8000"


def section(text: str, title: str) -> str:
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def console_blocks(text: str) -> list[tuple[str, str]]:
    """(command, expected output) of every indented `$ ` line of the text."""
    blocks: list[tuple[str, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("    $ "):
            command = line[6:]
            while command.endswith("\\"):
                i += 1
                command = command[:-1] + lines[i].strip()
            output: list[str] = []
            i += 1
            while i < len(lines) and lines[i].startswith("    ") and not lines[i].startswith("    $ "):
                output.append(lines[i][4:])
                i += 1
            blocks.append((command, "\n".join(output)))
            continue
        i += 1
    return blocks


def normalised(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "..." if k in VOLATILE else normalised(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalised(v) for v in value]
    return value


def parsed(text: str) -> Any:
    text = text.strip()
    try:
        return json.loads(text)
    except ValueError:
        return [json.loads(line) for line in text.splitlines()] if text.startswith("{") else text


@pytest.fixture
def live(project, fake_llm, monkeypatch):
    for folder in ("pipelines", "prompts", "schemas"):
        shutil.rmtree(project.root / folder)
        shutil.copytree(REPO / folder, project.root / folder)
    shutil.copytree(REPO / "examples" / "slide_judge", project.root / "examples" / "slide_judge")
    monkeypatch.setenv("JUDGE_BASE_URL", fake_llm.url.rsplit("/v1", 1)[0])
    fake_llm.script(json.dumps({"rating": "red", "score": 20, "explanation": "Revenue grew 11.7% in Q2, not 50%.",
                                "issues": [{"type": "derived", "detail": "8,080,000 / 7,234,567 is +11.7%"}]}),
                    contains="grew 50%")
    fake_llm.script(json.dumps({"rating": "green", "score": 92, "explanation": "Every number matches the source.",
                                "issues": []}))
    server = Process(project.root).ready()
    yield server
    server.stop()


def test_the_readme_serve_examples_run_as_shown(live, fake_llm):
    blocks = console_blocks(section((REPO / "README.md").read_text(encoding="utf-8"), "Serving judges: runner serve"))
    assert len(blocks) >= 6
    address = live.url.removeprefix("http://")
    seen_ids: dict[str, str] = {}
    for command, expected in blocks:
        assert command.startswith(("curl ", "runner ")), command
        if command.startswith("runner "):
            command = f"{sys.executable} -m runner.cli.app " + command.removeprefix("runner ")
        for shown, actual in seen_ids.items():
            command = command.replace(shown, actual)
        job = re.search(r"/v1/jobs/([\w-]+)", command)
        if job:                             # the job has ended before its state is shown
            deadline = time.monotonic() + 60
            while httpx.get(f"{live.url}/v1/jobs/{job[1]}").json()["status"] not in ("succeeded", "failed"):
                assert time.monotonic() < deadline
                time.sleep(0.05)
        done = subprocess.run(command.replace(README_ADDRESS, address), shell=True, capture_output=True, text=True,
                              cwd=live.root, timeout=120)
        assert done.returncode == 0, (command, done.stderr)
        got, want = parsed(done.stdout), parsed(expected)
        for name in ("id", "pipeline_hash"):       # named again by the commands that follow
            if isinstance(want, dict) and isinstance(got, dict) and name in want and name in got:
                seen_ids[want[name]] = got[name]
        assert normalised(got) == normalised(want), (command, done.stdout)
