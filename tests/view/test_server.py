"""A real `runner view` process: serves the runs on loopback, refuses foreign hosts and tokenless reviews."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get(port: int, path: str, host: str | None = None, method: str = "GET", body: str | None = None,
        headers: dict[str, str] | None = None) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    all_headers = {**({"Host": host} if host else {}), **(headers or {})}
    connection.request(method, path, body=body, headers=all_headers)
    answer = connection.getresponse()
    return answer.status, answer.read().decode("utf-8", "replace")


def wait_until_up(port: int, process: subprocess.Popen) -> None:
    for _ in range(300):
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        try:
            get(port, "/")
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("runner view did not start")


def test_a_real_server_serves_runs_and_refuses_foreign_hosts(reports: Path):
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "runner.cli.app", "view", str(reports), "--port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_up(port, process)
        status, home = get(port, "/")
        assert status == 200 and "t/r1" in home
        assert get(port, "/run/t/r1")[0] == 200
        assert get(port, "/", host="evil.example")[0] == 400
        assert get(port, "/run/..%2f..%2fetc")[0] == 404
        review = json.dumps({"run": "t/r1", "index": 1, "agrees": True})
        assert get(port, "/api/review", method="POST", body=review,
                   headers={"Content-Type": "application/json"})[0] == 403
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_a_non_loopback_bind_says_what_it_exposes_and_takes_only_the_allowed_hosts(reports: Path):
    """Issue 50, V3: `--host 0.0.0.0` serves other machines; a page that rebinds its own name
    to this machine is refused, and the warning says what the bind exposes and to whom."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "runner.cli.app", "view", str(reports), "--port", str(port),
                                "--host", "0.0.0.0", "--allow-host", "judge.example"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_up(port, process)
        assert get(port, "/", host=f"evil.example:{port}")[0] == 400
        review = json.dumps({"run": "t/r1", "index": 1, "agrees": True})
        assert get(port, "/api/review", host="evil.example", method="POST", body=review,
                   headers={"Content-Type": "application/json"})[0] == 400
        assert get(port, "/", host=f"judge.example:{port}")[0] == 200
        assert get(port, "/run/t/r1", host=f"localhost:{port}")[0] == 200
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=10)
    warning = next(line for line in stderr.splitlines() if line.startswith("warning:"))
    assert f"serving on 0.0.0.0:{port}" in warning and str(reports) in warning
    assert "prompts, answers" in warning and "save reviews" in warning
    assert "judge.example" in warning and "--allow-host" in warning
