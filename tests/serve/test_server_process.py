"""`runner serve` as users start it: a real uvicorn process. The checks before it binds, and
a kill -9 in the middle of a job: the next start resumes the job and repeats no answered call."""

from __future__ import annotations

import json
import signal
import socket
import time
from typing import Any

import httpx
import pytest

from fakellm import Reply
from runner.llm.calls.file import read_calls
from serve_fixtures import VERDICT, Process, deck

HTTP_JUDGE = """
version: 1
name: deck
input: {adapter: json, explode: slides, parent_as: deck}
env: [JUDGE_URL, JUDGE_KEY]
models:
  judge: {model: openai/judge, api_base: "{{ env.JUDGE_URL }}", api_key: "{{ env.JUDGE_KEY }}", retries: 0,
          timeout: 60, limits: {concurrency: 8}}
steps:
  - id: ask
    uses: llm
    with: {model: judge, prompt: "Data: {{ deck.data }}. Slide: {{ item.html }}.", output_schema: verdict.schema.json}
output:
  rating: "{{ steps.ask.output.rating }}"
summary: {count_by: rating}
"""
SECRET = "sk-serve-secret-key-0123456789abcdef"


@pytest.fixture
def http_project(project, fake_llm, monkeypatch):
    project.pipeline(HTTP_JUDGE, "deck.yaml")
    project.schema("verdict.schema.json", VERDICT)
    monkeypatch.setenv("JUDGE_URL", fake_llm.url)
    monkeypatch.setenv("JUDGE_KEY", SECRET)
    return project


def job_state(url: str, job_id: str) -> dict[str, Any]:
    return httpx.get(f"{url}/v1/jobs/{job_id}", timeout=10).json()


@pytest.mark.slow      # a real server process
def test_kill_9_mid_job_loses_nothing_and_repeats_no_answered_call(http_project, fake_llm):
    slides = [f"<p>slide {n}</p>" for n in range(8)]
    fake_llm.script(Reply(json.dumps({"rating": "amber", "score": 60}), delay=30), contains="slow")
    fake_llm.script(json.dumps({"rating": "green", "score": 90}))
    slides = [*slides[:5], *(f"<p>slow slide {n}</p>" for n in range(5, 8))]
    first = Process(http_project.root).ready()
    try:
        job = httpx.post(f"{first.url}/v1/pipelines/deck/jobs", json={"items": [deck(*slides)]}, timeout=10).json()
        deadline = time.monotonic() + 60
        while job_state(first.url, job["id"])["counts"]["done"] < 5 or len(fake_llm.requests) < 8:
            assert time.monotonic() < deadline, first.log.read_text()
            time.sleep(0.05)
        time.sleep(0.5)             # the answers reach the cache (committed within 50 ms)
        run = job_state(first.url, job["id"])["run"]
    finally:
        first.stop(signal.SIGKILL)
    answered = [r.prompt for r in fake_llm.requests if "slow" not in r.prompt]
    assert len(answered) == 5
    fake_llm.reset()
    fake_llm.script(json.dumps({"rating": "green", "score": 90}))
    second = Process(http_project.root).ready()
    try:
        deadline = time.monotonic() + 60
        while (state := job_state(second.url, job["id"]))["status"] != "succeeded":
            assert state["status"] in ("queued", "running") and time.monotonic() < deadline, state
            time.sleep(0.05)
        assert state["run"] == run and state["resumed"] == 1
        assert state["counts"]["resumed"] + state["counts"]["store"] == 5 and state["counts"]["judged"] == 3
        assert sorted(r.prompt for r in fake_llm.requests) == sorted(
            r for r in (f"Data: [1, 2]. Slide: <p>slow slide {n}</p>." for n in range(5, 8)))
        results = [json.loads(line) for line in
                   httpx.get(f"{second.url}/v1/jobs/{job['id']}/results", timeout=10).text.splitlines()]
        assert [r["index"] for r in results] == list(range(1, 9))
        # a restarted server serves every stored result
        stored = httpx.get(f"{second.url}/v1/results/{results[0]['item_key']}", params={"pipeline": "deck"}).json()
        assert stored["result"]["rating"] == "green"
        manifest = json.loads((http_project.root / run / "run.json").read_text())
        assert manifest["status"] == "finished"
        # calls.jsonl: each call sent once, the killed run's of the results taken up among them
        sent = [c["item"] for c in read_calls(http_project.root / run / "calls.jsonl") if not c["cached"]]
        assert sorted(set(sent)) == sorted(sent) and {6, 7, 8} <= set(sent)
        assert len(sent) == 3 + state["counts"]["resumed"]
    finally:
        second.stop()
    logs = first.log.read_text() + second.log.read_text()
    assert SECRET not in logs and SECRET not in (http_project.root / run / "results.jsonl").read_text()


def test_serving_beyond_loopback_needs_a_token(http_project, cli, tmp_path):
    for host in ("0.0.0.0", "localhost.", "LOCALHOST"):       # a spelling a resolver may send elsewhere too
        refused = cli("serve", "pipelines", "--host", host)
        assert refused.exit_code == 2 and f"--host {host} is reachable from other machines: give --token-file" \
            in refused.output
    (tmp_path / "short").write_text("abc\n")
    short = cli("serve", "pipelines", "--host", "0.0.0.0", "--token-file", str(tmp_path / "short"))
    assert short.exit_code == 2 and "at least 16 characters" in short.output
    missing = cli("serve", "nowhere")
    assert missing.exit_code == 2 and "nowhere: no such folder of pipelines" in missing.output
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = cli("serve", "pipelines", "--port", str(taken.getsockname()[1]))
    assert busy.exit_code == 2 and "choose another --port" in busy.output


@pytest.mark.slow      # a real server process
def test_a_token_file_guards_a_real_server(http_project, tmp_path):
    token = "x" * 40
    (tmp_path / "token").write_text(token + "\n")
    server = Process(http_project.root, "--token-file", str(tmp_path / "token")).ready()
    try:
        assert httpx.get(f"{server.url}/v1/pipelines").status_code == 401
        listed = httpx.get(f"{server.url}/v1/pipelines", headers={"Authorization": f"Bearer {token}"})
        assert listed.status_code == 200 and listed.json()["pipelines"][0]["name"] == "deck"
    finally:
        server.stop()
