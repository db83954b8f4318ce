"""`--executor processes`: items in worker processes on this machine, through the driver
--executor ray uses: the same files as a local run, one cache, run-wide limits, and Ctrl-C
writes what finished."""

from __future__ import annotations

import json

import pytest
from executor_cases import (
    a_models_concurrency_holds_across_workers,
    calls_in_order,
    ctrl_c_stops_the_workers_and_writes_what_finished,
    repeat_and_confidence_give_what_a_local_run_gives,
    report_of,
    results_of,
    slow_items,
    summary_of,
)

from helpers import copy_example
from test_citation_judge import EXAMPLE, PIPELINE, jury_overrides, script

pytestmark = pytest.mark.slow


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    copy_example(EXAMPLE, tmp_path / "example")
    monkeypatch.chdir(tmp_path / "example")
    return tmp_path / "example"


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
    assert results_of(workdir / "run-processes") == results_of(workdir / "run-local")
    assert summary_of(workdir / "run-processes") == summary_of(workdir / "run-local")
    assert calls_in_order(workdir / "run-processes") == calls_in_order(workdir / "run-local")
    assert report_of(workdir / "run-processes") == report_of(workdir / "run-local")
    assert processes.stdout.replace("run-processes", "X") == local.stdout.replace("run-local", "X")
    manifest = json.loads((workdir / "run-processes" / "run.json").read_text())
    assert manifest["argv"][-4:] == ["--executor", "processes", "--workers", "2"]

    # The workers wrote what they were answered into the one cache: a rerun sends only what
    # failed (answers the cache never keeps), through processes as locally.
    fake_llm.requests.clear()
    again = cli("run", str(PIPELINE), "--out", "again", *common, "--executor", "processes", "--workers", "2")
    assert again.exit_code == local.exit_code and len(fake_llm.requests) == failed
    assert [r["verdict"] for r in results_of(workdir / "again")] == [r["verdict"] for r in results_of(workdir / "run-local")]


PROCESSES = ["--executor", "processes"]


def test_a_models_concurrency_holds_across_workers(project, fake_llm, cli):
    a_models_concurrency_holds_across_workers(project, fake_llm, cli, PROCESSES)


def test_repeat_and_confidence_give_what_a_local_run_gives(project, fake_llm, cli):
    repeat_and_confidence_give_what_a_local_run_gives(project, fake_llm, cli, ["--executor", "processes"])


def test_ctrl_c_stops_the_workers_and_writes_what_finished(project, fake_llm):
    ctrl_c_stops_the_workers_and_writes_what_finished(project, fake_llm, PROCESSES)


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


def test_workers_end_with_a_driver_killed_with_kill_9(project, fake_llm):
    """The pool's processes outlived a killed driver: they sent the rest of their blocks' calls
    (paid for, never read), then waited on a queue forever, holding the driver's stdout."""
    import os
    import signal
    import subprocess
    import sys
    import time

    path = slow_items(project, fake_llm, 200, 0.2)
    driver = subprocess.Popen(
        [sys.executable, "-m", "runner.cli.app", "run", str(path), "--input", "in.json", "--out", "out", "--quiet",
         "--executor", "processes", "--workers", "2"], cwd=project.root, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, env={**os.environ, "RUNNER_CACHE_DIR": str(project.root / "cache")})
    deadline = time.monotonic() + 120
    while len(fake_llm.requests) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    time.sleep(3.0)                 # a worker looks for its driver every second
    asked = len(fake_llm.requests)
    time.sleep(1.5)
    assert len(fake_llm.requests) == asked and asked < 40, asked
