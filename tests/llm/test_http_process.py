"""`--http-process on`: OpenAI-compatible calls sent from a second process, against the fake
server: answers, errors, retries and deadlines as in-process; a process that dies or cannot
start leaves every call to this one."""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from test_http_transport import hostile as streaming
from test_llm import llm_pipeline

from fakellm import Reply
from helpers import run, write_json
from runner.errors import RunnerError
from runner.llm import aio_http, routing
from runner.llm.frames import HEADER, FrameChannel
from runner.llm.http_process import HTTPProcess


@pytest.fixture
def env(fake_llm, monkeypatch):
    monkeypatch.setenv("FAKE_URL", fake_llm.url)
    return fake_llm


@pytest.fixture
def no_local_http(monkeypatch):
    """This process cannot send a request itself: an answer came through the second process
    (a fresh interpreter, which this patch does not reach)."""
    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("sent from the main process")
    monkeypatch.setattr(aio_http.HTTPTransport, "complete", refuse)


@pytest.fixture
def started(monkeypatch) -> list[HTTPProcess]:
    """Every HTTP process a run starts (each with its child as `child`)."""
    seen: list[Any] = []
    start = HTTPProcess.start

    async def recording(self: HTTPProcess) -> None:
        seen.append(self)
        await start(self)
        self.child = self._process          # type: ignore[attr-defined]
    monkeypatch.setattr(HTTPProcess, "start", recording)
    return seen


def items(project, count: int):
    return write_json(project.root / "in.json", [{"q": str(n)} for n in range(count)])


@pytest.mark.parametrize("personality", [None, "llama-cpp-python", "ollama"])   # a JSON body, streams
def test_every_call_goes_through_the_process_and_answers_as_in_process(project, env, personality, no_local_http,
                                                                       started):
    env.personality = personality
    env.answer_json({"verdict": "yes"})
    outcome = run(llm_pipeline(project), items(project, 6), http_process="on")
    assert [r["verdict"] for r in outcome.results] == ["yes"] * 6
    assert sum(r.status == 200 for r in env.requests) == 6 and len(started) == 1   # (llama: a format refused first)
    assert started[0].child.returncode == 0                     # ended with the run, of itself
    assert run(llm_pipeline(project), items(project, 6), http_process="on",
               out="again").results[0]["cached"] is True


def test_a_retried_status_and_a_refused_request_read_as_in_process(project, env, no_local_http):
    env.script(Reply(status=429, content="slow down"), Reply(content='{"verdict": "no"}'))
    assert run(llm_pipeline(project), items(project, 1), http_process="on").results[0]["verdict"] == "no"
    assert len(env.requests) == 2

    env.reset()
    env.script(Reply(status=400))
    other = write_json(project.root / "other.json", [{"q": "another"}])
    result = run(llm_pipeline(project), other, http_process="on", out="bad").results[0]
    assert result["error"].endswith("HTTP 400: scripted status 400")       # the status and the server's text
    assert len(env.requests) == 1                               # a 400 is not retried


def test_a_deadline_cancels_the_call_in_the_process(project, monkeypatch, no_local_http):
    """A call past its deadline is cancelled in the HTTP process at once: its stream to the
    server closes before the next call (sent one at a time) is answered, not at the run's end."""
    left, answered, arrived = threading.Event(), [], iter(range(2))

    def answer(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        if next(arrived) == 0:                                   # the first: a piece each 50 ms, for 10 s
            try:
                for _ in range(200):
                    handler.wfile.write(b'data: {"choices": [{"delta": {"content": " "}}]}\n\n')
                    handler.wfile.flush()
                    time.sleep(0.05)
            except (BrokenPipeError, ConnectionResetError):
                left.set()
            return
        time.sleep(0.3)                                          # the slow stream's writes notice, meanwhile
        answered.append(left.is_set())
        handler.wfile.write(b'data: {"choices": [{"delta": {"content": "{\\"verdict\\": \\"yes\\"}"}, '
                            b'"finish_reason": "stop"}]}\n\ndata: [DONE]\n\n')

    with streaming(answer) as url:
        monkeypatch.setenv("FAKE_URL", url)
        path = llm_pipeline(project, retries=0, extra="timeout: 1\n            limits: {concurrency: 1}")
        results = run(path, items(project, 2), http_process="on").results
    assert sorted(str(r.get("verdict")) + ("timed out" in r.get("error", "")) * " timed out" for r in results) \
        == ["None timed out", "yes"]
    assert answered == [True]                                    # the slow stream had closed already


def test_a_process_that_dies_leaves_its_calls_to_this_one(project, env, started, capfd):
    env.script(Reply(content='{"verdict": "yes"}', delay=0.4))
    killed = threading.Event()

    def kill_once_a_request_arrived() -> None:
        deadline = time.monotonic() + 10
        while not env.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        process = started[0]._process
        assert process is not None
        os.kill(process.pid, signal.SIGKILL)
        killed.set()

    killer = threading.Thread(target=kill_once_a_request_arrived)
    killer.start()
    outcome = run(llm_pipeline(project), items(project, 4), http_process="on")
    killer.join()
    assert killed.is_set()
    assert [r["verdict"] for r in outcome.results] == ["yes"] * 4      # each lost call sent again, here
    assert capfd.readouterr().err.count("the HTTP process stopped") == 1


def test_a_process_that_cannot_start_leaves_every_call_to_this_one(project, env, monkeypatch, capfd):
    env.answer_json({"verdict": "yes"})
    monkeypatch.setattr(sys, "executable", str(project.root / "no-such-python"))
    outcome = run(llm_pipeline(project), items(project, 3), http_process="on")
    assert [r["verdict"] for r in outcome.results] == ["yes"] * 3
    err = capfd.readouterr().err
    assert err.count("the HTTP process stopped (cannot start it:") == 1


def test_off_never_starts_a_process(project, env, started):
    env.answer_json({"verdict": "yes"})
    assert run(llm_pipeline(project), items(project, 3)).results[0]["verdict"] == "yes"
    assert started == []


def test_the_mode_follows_the_system_and_refuses_what_it_does_not_know(monkeypatch):
    assert routing.http_process_mode("on") == "on" and routing.http_process_mode("off") == "off"
    monkeypatch.setattr(routing.os, "name", "nt")                 # no socket for a child process
    assert routing.http_process_mode("on") == "off"
    with pytest.raises(RunnerError, match="--http-process sometimes: choose from on, off"):
        routing.http_process_mode("sometimes")


def test_a_ray_worker_sends_its_own_calls(tmp_path):
    from runner.engine.context import RunOptions
    from runner.llm.service import LLMService
    options = RunOptions(cache_dir=tmp_path, worker=True, http_process="on")
    service = LLMService(lambda name: None, options, {})         # type: ignore[arg-type,return-value]
    assert service.sender.transport.http_process == "off"


def test_a_bad_mode_on_the_command_line_is_exit_2(project, cli):
    path = llm_pipeline(project)
    result = cli("run", str(path), "--input", str(items(project, 1)), "--http-process", "always")
    assert result.exit_code == 2
    assert "--http-process always: choose from on, off" in result.output


def test_the_mode_is_kept_in_the_runs_command_line(project, env, cli):
    env.answer_json({"verdict": "yes"})
    result = cli("run", str(llm_pipeline(project)), "--input", str(items(project, 1)), "--out", "o",
                 "--http-process", "on", "--quiet")
    assert result.exit_code == 0, result.output
    manifest = json.loads((project.root / "o" / "run.json").read_text(encoding="utf-8"))
    assert "--http-process" in json.dumps(manifest)


def test_frames_cut_anywhere_arrive_whole_and_in_order():
    got: list[Any] = []
    channel = FrameChannel(got.append, lambda exc: None)
    messages = [("spec", 0, {"a": 1}), (1, 0, [{"role": "user", "content": "x" * 5000}], {}), ("cancel", 1)]
    stream = b"".join(HEADER.pack(len(p)) + p for p in (pickle.dumps(m) for m in messages))
    for start in range(0, len(stream), 7):
        channel.data_received(stream[start:start + 7])
    assert got == messages


def test_a_failed_request_comes_back_with_every_field_of_its_error(fake_llm):
    from runner.llm.spec import build_spec
    from runner.llm.transport import TransportError
    fake_llm.script(Reply(status=429, headers={"Retry-After": "7"}))
    spec = build_spec("m", {"model": "openai/m", "api_base": fake_llm.url})

    async def ask() -> TransportError:
        process = HTTPProcess()
        await process.start()
        try:
            with pytest.raises(TransportError) as caught:
                await process.complete(spec, [{"role": "user", "content": "hi"}], {})
            return caught.value
        finally:
            await process.aclose()

    error = asyncio.run(ask())
    assert (error.kind, error.status, error.retry_after) == ("rate_limit", 429, 7.0)
    assert "scripted status 429" in error.body and error.retryable


def test_closing_with_a_call_in_flight_ends_the_call_and_the_process(fake_llm, capfd):
    from runner.llm.spec import build_spec
    from runner.llm.spill import SpillingHTTP
    from runner.llm.transport import TransportError
    fake_llm.script(Reply(content="late", delay=5))
    spec = build_spec("m", {"model": "openai/m", "api_base": fake_llm.url})

    async def close_while_asking() -> tuple[BaseException | None, int | None]:
        transport = SpillingHTTP()
        await transport.prepare()
        child = transport.process._process
        call = asyncio.ensure_future(transport.complete(spec, [{"role": "user", "content": "hi"}], {}))
        while not fake_llm.requests:
            await asyncio.sleep(0.01)
        await transport.aclose()
        outcome = (await asyncio.gather(call, return_exceptions=True))[0]
        assert child is not None
        return outcome if isinstance(outcome, BaseException) else None, child.returncode

    error, returncode = asyncio.run(close_while_asking())
    assert isinstance(error, TransportError) and error.kind == "connection"
    assert returncode == 0                                       # it ended of itself, not killed
    assert "the HTTP process stopped" not in capfd.readouterr().err   # closing is not a loss to report
