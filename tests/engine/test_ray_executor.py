"""`--executor ray` on a real local Ray cluster (a head node and a second node process):
the same files as a local run, one cache, run-wide limits, and no item lost to a dead node."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from executor_cases import (
    a_models_concurrency_holds_across_workers,
    calls_in_order,
    ctrl_c_stops_the_workers_and_writes_what_finished,
    repeat_and_confidence_give_what_a_local_run_gives,
    report_of,
    results_of,
    summary_of,
)

from fakellm import Reply
from helpers import copy_example
from test_citation_judge import EXAMPLE, PIPELINE, answer, jury_overrides, script

REQUIRED = os.environ.get("RUNNER_REQUIRE_RAY") == "1"      # CI: run, never skip
pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.xdist_group("ray_cluster"), pytest.mark.skipif(
    not (REQUIRED or importlib.util.find_spec("ray")), reason="the ray extra is not installed")]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Cluster:
    def __init__(self, root: Path):
        self.root = root
        self.temp = root / "ray"            # Ray's sockets need a short path
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.second_port = _free_port()
        # Token authentication (on by default for new clusters) with a token of our own, in
        # the environment of every process: the nodes, the driver and its workers.
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16),
                    "RAY_USAGE_STATS_ENABLED": "0"}

    def ray(self, *args: str) -> None:
        done = subprocess.run([str(Path(sys.executable).parent / "ray"), *args], env=self.env,
                              capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    def start(self) -> None:
        self.ray("start", "--head", f"--port={self.port}", "--node-ip-address=127.0.0.1", "--num-cpus=1",
                 "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={self.temp}")
        self.ray("start", f"--address={self.address}", "--node-ip-address=127.0.0.1", "--num-cpus=1",
                 f"--node-manager-port={self.second_port}", "--disable-usage-stats")

    def stop(self) -> None:
        """This cluster's processes (the head's and each node's, whose command lines name its
        folder, and every process under them) ended, and no other: `ray stop --force` ends every
        Ray instance on the machine, another test run's too (one died mid-test that way, its
        driver's GCS gone)."""
        mine = _under({pid for pid, line in _command_lines().items() if str(self.temp).encode() in line})
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in mine:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and any(_running(pid) for pid in mine):
                time.sleep(0.1)

    def second_raylet(self) -> int:
        for proc in Path("/proc").iterdir():
            try:
                args = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if args and args[0].endswith(b"raylet") and f"--node_manager_port={self.second_port}".encode() in args:
                return int(proc.name)
        raise AssertionError(f"no raylet on port {self.second_port}")

    def kill_second_node(self) -> list[bytes]:
        """The second node gone at once, as when its machine dies: its raylet and every
        process under it (the workers), stopped together, then killed; their command lines
        (an actor's names its class: `ray::RayWorker...`). Killing the raylet alone leaves its
        workers running their blocks for up to a second, beside the retries of the same blocks
        on the other node."""
        node = _under({self.second_raylet()})
        killed: list[bytes] = []
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in node:
                try:
                    if sig == signal.SIGKILL:       # stopped: its command line no longer changes
                        killed.append(Path(f"/proc/{pid}/cmdline").read_bytes())
                    os.kill(pid, sig)
                except (ProcessLookupError, FileNotFoundError):
                    pass
        return killed


def _command_lines() -> dict[int, bytes]:
    lines: dict[int, bytes] = {}
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError):
            lines[int(proc.name)] = (proc / "cmdline").read_bytes()
    return lines


def _under(roots: set[int]) -> set[int]:
    """The processes `roots` and every process under them."""
    parents: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        try:
            parents[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    tree = set(roots)
    while grown := {pid for pid, parent in parents.items() if parent in tree} - tree:
        tree |= grown
    return tree


def _running(pid: int) -> bool:
    """Alive and not a zombie (an ended process whose parent has not collected it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    root = Path(f"/tmp/rr{os.getpid()}")
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    running = Cluster(root)
    try:
        running.start()
        yield running
    finally:
        running.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def on_cluster(cluster, monkeypatch):
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_USAGE_STATS_ENABLED"):
        monkeypatch.setenv(name, cluster.env[name])
    return cluster


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    copy_example(EXAMPLE, tmp_path / "example")
    monkeypatch.chdir(tmp_path / "example")
    return tmp_path / "example"




def test_the_citation_example_gives_the_local_files_and_shares_the_cache(on_cluster, workdir, fake_llm, cli,
                                                                        tmp_path, monkeypatch):
    script(fake_llm)
    common = ["--input", "report.md", *jury_overrides(fake_llm.url)]
    local = cli("run", str(PIPELINE), "--out", "run-local", *common, "--cache-dir", str(tmp_path / "local-cache"))
    assert local.exit_code == 0, local.output
    sent_locally = len(fake_llm.requests)
    fake_llm.requests.clear()

    ray_run = cli("run", str(PIPELINE), "--out", "run-ray", *common, "--cache-dir", str(tmp_path / "cache"),
                  "--executor", "ray", "--ray-address", on_cluster.address, "--workers", "2")
    assert ray_run.exit_code == local.exit_code, ray_run.output
    assert len(fake_llm.requests) == sent_locally
    assert results_of(workdir / "run-ray") == results_of(workdir / "run-local")
    assert summary_of(workdir / "run-ray") == summary_of(workdir / "run-local")
    assert calls_in_order(workdir / "run-ray") == calls_in_order(workdir / "run-local")
    assert report_of(workdir / "run-ray") == report_of(workdir / "run-local")
    manifest = json.loads((workdir / "run-ray" / "run.json").read_text())
    assert "--executor" in json.dumps(manifest)

    # The cached rerun through Ray sends only what failed (answers the cache never keeps) ...
    failed = sum(1 for r in fake_llm.requests if r.status >= 400)
    fake_llm.requests.clear()
    again = cli("run", str(PIPELINE), "--out", "ray2", *common, "--cache-dir", str(tmp_path / "cache"),
                "--executor", "ray", "--ray-address", on_cluster.address)
    assert again.exit_code == local.exit_code, again.output
    assert len(fake_llm.requests) == failed
    assert [r["verdict"] for r in results_of(workdir / "ray2")] == [r["verdict"] for r in results_of(workdir / "run-local")]

    # ... and so does a local run after it, on what the Ray workers cached.
    fake_llm.requests.clear()
    back = cli("run", str(PIPELINE), "--out", "local2", *common, "--cache-dir", str(tmp_path / "cache"))
    assert back.exit_code == local.exit_code, back.output
    assert len(fake_llm.requests) == failed

    # Workers that cannot see the driver's disk (on another machine) go through the cache actor.
    monkeypatch.setenv("RUNNER_RAY_REMOTE_CACHE", "1")
    fake_llm.requests.clear()
    remote = cli("run", str(PIPELINE), "--out", "remote", *common, "--cache-dir", str(tmp_path / "cache"),
                 "--executor", "ray", "--ray-address", on_cluster.address)
    assert remote.exit_code == local.exit_code, remote.output
    assert len(fake_llm.requests) == failed
    assert results_of(workdir / "remote") == results_of(workdir / "ray2")

    # Once every juror has answered, a cached rerun through Ray sends nothing at all.
    fake_llm.reset()
    fake_llm.script(Reply(answer("VALID", "any")))
    filled = cli("run", str(PIPELINE), "--out", "filled", *common, "--cache-dir", str(tmp_path / "cache"),
                 "--executor", "ray", "--ray-address", on_cluster.address)
    assert filled.exit_code == 0, filled.output
    assert len(fake_llm.requests) == failed
    fake_llm.requests.clear()
    cached = cli("run", str(PIPELINE), "--out", "cached", *common, "--cache-dir", str(tmp_path / "cache"),
                 "--executor", "ray", "--ray-address", on_cluster.address)
    assert cached.exit_code == 0, cached.output
    assert fake_llm.requests == []
    assert "0 sent" in cached.stdout


def test_a_models_concurrency_holds_across_workers(on_cluster, project, fake_llm, cli):
    a_models_concurrency_holds_across_workers(project, fake_llm, cli, ["--executor", "ray", "--ray-address",
                                                                       on_cluster.address])


def test_repeat_and_confidence_give_what_a_local_run_gives(on_cluster, project, fake_llm, cli):
    repeat_and_confidence_give_what_a_local_run_gives(project, fake_llm, cli, ["--executor", "ray", "--ray-address",
                                                                               on_cluster.address])


def test_a_node_killed_mid_run_loses_no_item_and_writes_none_twice(on_cluster, project, fake_llm, cli):
    project.pipeline(f"""
        version: 1
        name: slow
        concurrency: 1
        models: {{m: {{model: openai/fake, api_base: "{fake_llm.url}", retries: 0}}}}
        steps: [{{id: a, uses: llm, with: {{model: m, prompt: "Say {{{{ item.n }}}}"}}}}]
        output: {{answer: "{{{{ steps.a.raw }}}}"}}
        """)
    fake_llm.script(Reply("ok", delay=0.3))
    items = 24
    (project.root / "in.json").write_text(json.dumps([{"n": n} for n in range(items)]))
    outcome: dict[str, object] = {}
    run = threading.Thread(target=lambda: outcome.setdefault("result", cli(
        "run", "pipelines/p.yaml", "--input", "in.json", "--out", "out", "--executor", "ray",
        "--ray-address", on_cluster.address, "--workers", "2")))
    run.start()
    while len(fake_llm.requests) < 6 and run.is_alive():
        time.sleep(0.05)
    killed = on_cluster.kill_second_node()
    assert len(killed) > 1                          # the raylet and its processes
    # The RayWorkers that were on the lost node: Ray's SPREAD is best effort, and on a busy
    # machine both were seen on one node (or both on the other).
    lost_workers = sum(1 for line in killed if line.startswith(b"ray::RayWorker"))
    run.join(timeout=300)
    result = outcome["result"]
    assert result.exit_code == 0, result.output
    results = project.results("out")
    assert [r["index"] for r in results] == list(range(1, items + 1))
    assert all(r["answer"] == "ok" and "error" not in r for r in results)
    asked = [r.prompt for r in fake_llm.requests]
    assert len(set(asked)) == items
    # Asked again: at most the calls in flight on the lost node, a call for each block its workers
    # held (two blocks a worker, one call a block at concurrency 1), never one whose answer reached its worker.
    assert len(asked) <= items + 2 * lost_workers, (lost_workers, asked)


def test_without_ray_or_with_a_wrong_executor_is_exit_2(workdir, cli, tmp_path, monkeypatch):
    wrong = cli("run", str(PIPELINE), "--input", "report.md", "--executor", "spark", "--cache-dir", str(tmp_path))
    assert wrong.exit_code == 2 and "--executor spark: choose from local, processes, ray" in wrong.stderr
    alone = cli("run", str(PIPELINE), "--input", "report.md", "--workers", "2", "--cache-dir", str(tmp_path))
    assert alone.exit_code == 2 and "--workers goes with --executor processes or --executor ray" in alone.stderr
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "ray" else object())
    missing = cli("run", str(PIPELINE), "--input", "report.md", "--executor", "ray", "--cache-dir", str(tmp_path))
    assert missing.exit_code == 2 and "pip install 'runner[ray]'" in missing.stderr
    assert not (workdir / "reports").exists()


def test_batch_mode_works_under_ray(on_cluster, project, fake_llm, monkeypatch):
    from test_batch import batch_pipeline

    from helpers import run, write_json
    from runner.engine.executors import ExecutorChoice
    monkeypatch.setenv("FAKE_URL", fake_llm.url)
    fake_llm.answer_json({"verdict": "no"}, contains="Second look")
    fake_llm.answer_json({"verdict": "yes"}, contains="Question")
    path = batch_pipeline(project)
    items = write_json(project.root / "in.json", [{"q": f"q{i}"} for i in range(12)])
    outcome = run(path, items, batch=True, executor=ExecutorChoice("ray", on_cluster.address, 2))
    assert [(r["verdict"], r["second"]) for r in outcome.results] == [("yes", "no")] * 12
    assert fake_llm.requests == []                                   # no live chat request
    assert sum(len(b.lines) for b in fake_llm.batches.created()) == 24
    assert outcome.summary["models"]["m"]["calls"] == 24


def test_ctrl_c_stops_the_workers_and_writes_what_finished(on_cluster, project, fake_llm):
    ctrl_c_stops_the_workers_and_writes_what_finished(project, fake_llm, ["--executor", "ray", "--ray-address",
                                                                          on_cluster.address])
