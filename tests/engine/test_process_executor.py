"""`--executor processes`: items in worker processes on this machine, through the driver
--executor ray uses: the same files as a local run, one cache, run-wide limits, and Ctrl-C
writes what finished."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fakellm import Reply
from test_citation_judge import EXAMPLE, PIPELINE, jury_overrides, script


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    shutil.copytree(EXAMPLE, tmp_path / "example")
    monkeypatch.chdir(tmp_path / "example")
    return tmp_path / "example"


def _untimed(value):
    """Without timings (latency_ms, duration_ms), which differ between any two runs."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in ("latency_ms", "duration_ms")}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _results(folder: Path) -> list[dict]:
    return [_untimed(json.loads(line)) for line in (folder / "results.jsonl").read_text().splitlines()]


def _summary(folder: Path) -> dict:
    summary = json.loads((folder / "summary.json").read_text())
    # An item whose three jurors all fail is grouped under the call that failed last, which
    # depends on timing in a local run too: the groups' sizes are compared.
    summary["error_groups"] = sorted(group["count"] for group in summary.get("error_groups", []))
    return _untimed(summary)


def _report(folder: Path) -> str:
    """report.md without its timings and its folder's name."""
    text = (folder / "report.md").read_text().replace(str(folder.name), "FOLDER")
    return re.sub(r"\d+(\.\d+)? ?(ms|s)\b", "T", text)


def test_the_citation_example_gives_the_local_files_and_shares_the_cache(workdir, fake_llm, cli, tmp_path):
    script(fake_llm)
    common = ["--input", "report.md", *jury_overrides(fake_llm.url), "--cache-dir", str(tmp_path / "cache")]
    local = cli("run", str(PIPELINE), "--out", "run-local", *common, "--no-cache")
    assert local.exit_code == 0, local.output
    sent_locally = len(fake_llm.requests)
    failed = sum(1 for r in fake_llm.requests if r.status >= 400)
    fake_llm.requests.clear()

    processes = cli("run", str(PIPELINE), "--out", "run-processes", *common, "--no-cache",
                    "--executor", "processes", "--workers", "2")
    assert processes.exit_code == local.exit_code, processes.output
    assert len(fake_llm.requests) == sent_locally
    assert _results(workdir / "run-processes") == _results(workdir / "run-local")
    assert _summary(workdir / "run-processes") == _summary(workdir / "run-local")
    assert _report(workdir / "run-processes") == _report(workdir / "run-local")
    assert processes.stdout.replace("run-processes", "X") == local.stdout.replace("run-local", "X")
    manifest = json.loads((workdir / "run-processes" / "run.json").read_text())
    assert manifest["argv"][-4:] == ["--executor", "processes", "--workers", "2"]

    # The workers wrote what they were answered into the one cache: a rerun sends only what
    # failed (answers the cache never keeps), through processes as locally.
    fake_llm.requests.clear()
    again = cli("run", str(PIPELINE), "--out", "again", *common, "--executor", "processes", "--workers", "2")
    assert again.exit_code == local.exit_code and len(fake_llm.requests) == failed
    assert [r["verdict"] for r in _results(workdir / "again")] == [r["verdict"] for r in _results(workdir / "run-local")]


def test_a_models_concurrency_holds_across_workers(project, fake_llm, cli):
    project.pipeline(f"""
        version: 1
        name: limited
        concurrency: 4
        models: {{m: {{model: openai/fake, api_base: "{fake_llm.url}", limits: {{concurrency: 2}}}}}}
        steps: [{{id: a, uses: llm, with: {{model: m, prompt: "Say {{{{ item.n }}}}"}}}}]
        output: {{answer: "{{{{ steps.a.raw }}}}"}}
        """)
    fake_llm.script(Reply("ok", delay=0.3))
    (project.root / "in.json").write_text(json.dumps([{"n": n} for n in range(16)]))
    result = cli("run", "pipelines/p.yaml", "--input", "in.json", "--out", "out", "--executor", "processes",
                 "--workers", "2")
    assert result.exit_code == 0, result.output
    spans = [(r.started, r.finished) for r in fake_llm.requests]
    assert len(spans) == 16 and [r["answer"] for r in project.results("out")] == ["ok"] * 16
    most = max(sum(1 for start, end in spans if start <= moment < end) for moment, _ in spans)
    assert most == 2                  # 2 workers x 4 items each could have sent 8 at once


def test_ctrl_c_stops_the_workers_and_writes_what_finished(project, fake_llm):
    fake_llm.script(Reply("done", delay=0.3))
    path = project.pipeline(f"""
        version: 1
        name: slow
        concurrency: 1
        models: {{m: {{model: openai/fake, api_base: "{fake_llm.url}"}}}}
        steps: [{{id: a, uses: llm, with: {{model: m, prompt: "Item {{{{ item.n }}}}"}}}}]
        output: {{answer: "{{{{ steps.a.raw }}}}"}}
        """)
    (project.root / "in.json").write_text(json.dumps([{"n": n} for n in range(40)]))
    process = subprocess.Popen(
        [sys.executable, "-m", "runner.cli.app", "run", str(path), "--input", "in.json", "--out", "out",
         "--executor", "processes", "--workers", "2"],
        cwd=project.root, env={**os.environ, "RUNNER_CACHE_DIR": str(project.root / "cache")},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = project.root / "out" / "results.jsonl"
    deadline = time.monotonic() + 120
    while not (results.exists() and results.read_text().count("\n") >= 5) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    summary = json.loads((project.root / "out" / "summary.json").read_text())
    written = [json.loads(line) for line in results.read_text().splitlines()]
    assert summary["interrupted"] is True and summary["total"] == len(written) and 5 <= len(written) < 40
    assert all(r["answer"] == "done" for r in written)
    assert stdout.startswith(f"{len(written)} of 40 item(s), interrupted")
    asked = len(fake_llm.requests)
    time.sleep(1.0)
    assert len(fake_llm.requests) == asked          # the workers stopped with the driver


def test_workers_and_ray_address_go_with_their_executors(project, cli):
    path = project.pipeline("""
        version: 1
        name: p
        steps: [{id: s, uses: compute, with: {n: "{{ item.n }}"}}]
        output: {n: "{{ steps.s.n }}"}
        """)
    alone = cli("run", str(path), "--record", "n=1", "--workers", "2")
    assert alone.exit_code == 2 and "--workers goes with --executor processes or --executor ray" in alone.stderr
    address = cli("run", str(path), "--record", "n=1", "--executor", "processes", "--ray-address", "auto")
    assert address.exit_code == 2 and "--ray-address goes with --executor ray" in address.stderr
    wrong = cli("run", str(path), "--record", "n=1", "--executor", "spark")
    assert wrong.exit_code == 2 and "--executor spark: choose from local, processes, ray" in wrong.stderr
