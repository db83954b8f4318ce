"""The HTTP transport against hostile and odd servers on 127.0.0.1: a cap on what is read
(gzip bombs, huge bodies, endless streams), streams that end early or are filtered,
redirects, and surrogates split across stream chunks."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from unittest.mock import ANY

import pytest
from test_llm import server_pipeline

from fakellm import Reply
from helpers import run, write_json
from runner.llm.client.http import HTTPTransport
from runner.llm.client.spec import build_spec
from runner.llm.client.transport import Completion, TransportError

MB = 1024 * 1024


@contextmanager
def hostile(answer: Callable[[BaseHTTPRequestHandler], None]) -> Iterator[str]:
    """A server whose every POST is answered by `answer`; yields its /v1 URL."""
    requests: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            requests.append(self.path)
            self.close_connection = True
            try:
                answer(self)
            except (BrokenPipeError, ConnectionResetError):
                pass                    # the client stopped reading: what the cap is for

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    # shutdown() waits for the loop to look at its flag: every 20 ms, not the default 0.5 s
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def complete(url: str, **entry: Any) -> Completion:
    spec = build_spec("m", {"model": "openai/m", "api_base": url, **entry})

    async def go() -> Completion:
        transport = HTTPTransport()
        try:
            return await transport.complete(spec, [{"role": "user", "content": "hi"}], {})
        finally:
            await transport.aclose()
    return asyncio.run(go())


def failure(url: str, **entry: Any) -> TransportError:
    with pytest.raises(TransportError) as caught:
        complete(url, **entry)
    return caught.value


def head(handler: BaseHTTPRequestHandler, status: int = 200, **headers: str) -> None:
    handler.send_response(status)
    for name, value in headers.items():
        handler.send_header(name.replace("_", "-"), value)
    handler.end_headers()


def chat(content: str, finish: str = "stop") -> bytes:
    return json.dumps({"choices": [{"index": 0, "finish_reason": finish,
                                    "message": {"role": "assistant", "content": content}}]}).encode()


def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}).encode() + b"\n\n"


def test_a_gzip_bomb_fails_naming_the_cap():
    bomb = gzip.compress(b" " * (64 * MB), compresslevel=9)         # 64 KB on the wire

    def answer(handler: BaseHTTPRequestHandler) -> None:
        head(handler, Content_Type="application/json", Content_Encoding="gzip", Content_Length=str(len(bomb)))
        handler.wfile.write(bomb)

    with hostile(answer) as url:
        error = failure(url)
    assert error.kind == "too_large" and not error.retryable
    assert "models.m.max_response_bytes = 8388608 bytes (decompressed)" in error.message


def test_an_endless_body_fails_naming_the_cap():
    def answer(handler: BaseHTTPRequestHandler) -> None:
        head(handler, Content_Type="application/json", Transfer_Encoding="chunked")
        piece = b"x" * 65536
        while True:             # 300 MB and more, no length announced
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))

    with hostile(answer) as url:
        error = failure(url, max_response_bytes=1 * MB)
    assert error.kind == "too_large" and "models.m.max_response_bytes = 1048576 bytes" in error.message


def test_a_declared_length_over_the_cap_is_refused_before_reading():
    def answer(handler: BaseHTTPRequestHandler) -> None:
        head(handler, Content_Type="application/json", Content_Length=str(300 * MB))
        handler.wfile.write(b"{" * 1024)

    with hostile(answer) as url:
        assert failure(url).kind == "too_large"


def test_an_endless_stream_fails_naming_the_cap():
    def answer(handler: BaseHTTPRequestHandler) -> None:
        head(handler, Content_Type="text/event-stream")
        while True:
            handler.wfile.write(event({"content": "x" * 4000}))

    with hostile(answer) as url:          # 127.0.0.1: a local server, asked to stream
        error = failure(url, max_response_bytes=MB)
    assert error.kind == "too_large" and "max_response_bytes = 1048576" in error.message


def test_answers_under_the_cap_arrive_whole_compressed_or_not():
    text = "é" * 100_000
    body = gzip.compress(chat(text))

    def answer(handler: BaseHTTPRequestHandler) -> None:
        head(handler, Content_Type="application/json", Content_Encoding="gzip", Content_Length=str(len(body)))
        handler.wfile.write(body)

    with hostile(answer) as url:
        assert complete(url).text == text


def stream(*events: bytes) -> Callable[[BaseHTTPRequestHandler], None]:
    def answer(handler: BaseHTTPRequestHandler) -> None:
        head(handler, Content_Type="text/event-stream")
        for piece in events:
            handler.wfile.write(piece)
            handler.wfile.flush()
    return answer


@pytest.mark.parametrize("ending", [b"", b"data: [DONE]\n\n"], ids=["cut", "interrupted"])
def test_a_stream_ending_without_a_finish_reason_is_incomplete(ending):
    """llama-cpp-python ends an answer it interrupts for another request with [DONE] alone."""
    with hostile(stream(event({"role": "assistant"}), event({"content": '{"verdict": "y'}), ending)) as url:
        error = failure(url)
    assert error.kind == "incomplete" and error.retryable and "finish_reason" in error.message


def test_a_stream_is_complete_with_a_finish_reason():
    with hostile(stream(event({"content": "whole"}), event({}, "stop"))) as url:
        assert complete(url).text == "whole"


def test_a_surrogate_pair_split_across_two_chunks_is_one_character():
    first = b'data: {"choices": [{"index": 0, "delta": {"content": "smile \\ud83d"}}]}\n\n'
    second = b'data: {"choices": [{"index": 0, "delta": {"content": "\\ude00!"}, "finish_reason": "stop"}]}\n\n'
    with hostile(stream(first, second)) as url:
        assert complete(url).text == "smile \U0001f600!"


def test_a_lone_surrogate_in_an_answer_is_replaced():
    body = b'{"choices": [{"index": 0, "finish_reason": "stop", "message": {"content": "bad \\ud83d end"}}]}'

    def answer(handler: BaseHTTPRequestHandler) -> None:
        head(handler, Content_Type="application/json", Content_Length=str(len(body)))
        handler.wfile.write(body)

    with hostile(answer) as url:
        assert complete(url).text == "bad \ufffd end"


def test_a_redirect_is_reported_not_followed_nor_retried():
    hits: list[int] = []

    def answer(handler: BaseHTTPRequestHandler) -> None:
        hits.append(1)
        head(handler, 302, Location="http://127.0.0.1:9/v1/chat/completions?token=abc", Content_Length="0")

    with hostile(answer) as url:
        error = failure(url)
    assert error.kind == "redirect" and not error.retryable
    assert "redirects to http://127.0.0.1:9/v1/chat/completions" in error.message and "token" not in error.message
    assert "cut" not in error.message and len(hits) == 1


# -- whole runs: what fails is never cached ---------------------------------------------------

@pytest.fixture
def env(fake_llm, monkeypatch):
    monkeypatch.setenv("FAKE_URL", fake_llm.url)
    return fake_llm


@pytest.mark.parametrize("personality", [None, "lm-studio"])      # a JSON body, a stream
def test_content_filter_is_an_error_and_never_cached(project, env, personality):
    env.personality = personality
    env.script(Reply('{"verdict": "yes"}', finish_reason="content_filter"))
    path = server_pipeline(project)
    result = run(path, write_json(project.root / "in.json", [{"q": "1"}])).results[0]
    assert "content_filter" in result["error"]
    run(path, project.root / "in.json")
    assert len(env.requests) == 2                                   # asked again: nothing was cached


def test_a_redirect_in_a_run_is_one_request_and_a_clear_error(project, env):
    env.script(Reply(status=307, headers={"Location": "https://elsewhere.example/v1/chat/completions"}))
    result = run(server_pipeline(project), write_json(project.root / "in.json", [{"q": "1"}])).results[0]
    assert len(env.requests) == 1
    assert "redirects to https://elsewhere.example/v1/chat/completions" in result["error"]
    assert "does not follow redirects" in result["error"] and "cut" not in result["error"]


def test_an_incomplete_stream_is_never_cached(project, monkeypatch):
    answers = iter([stream(event({"content": '{"verdict": "y'})),
                    stream(event({"content": '{"verdict": "yes"}'}, "stop"))] * 10)

    with hostile(lambda handler: next(answers)(handler)) as url:
        monkeypatch.setenv("FAKE_URL", url)
        path = server_pipeline(project, retries=0)
        first = run(path, write_json(project.root / "in.json", [{"q": "1"}])).results[0]
        assert "the stream ended without finish_reason or [DONE]" in first["error"]
        assert run(path, project.root / "in.json").results[0] == {"index": 1, "item_key": ANY, "verdict": "yes", "cached": False}


def test_a_server_interrupting_an_answer_for_the_next_request_settles_at_one(project, monkeypatch, capfd):
    """llama-cpp-python (interrupt_requests, its default) ends the answer it is streaming with
    [DONE] when another request arrives: found out, sent one at a time, every item answered."""
    serving, guard, waiting = threading.Lock(), threading.Lock(), [0]

    def answer(handler: BaseHTTPRequestHandler) -> None:
        with guard:
            waiting[0] += 1
        with serving:
            with guard:
                waiting[0] -= 1
            head(handler, Content_Type="text/event-stream")
            for piece in ('{"verdict": ', '"yes"}'):
                time.sleep(0.05)
                if waiting[0]:
                    handler.wfile.write(b"data: [DONE]\n\n")
                    return
                handler.wfile.write(event({"content": piece}))
            handler.wfile.write(event({}, "stop") + b"data: [DONE]\n\n")

    with hostile(answer) as url:
        monkeypatch.setenv("FAKE_URL", url)
        outcome = run(server_pipeline(project), write_json(project.root / "in.json", [{"q": str(n)} for n in range(10)]))
    assert [r["verdict"] for r in outcome.results] == ["yes"] * 10
    err = capfd.readouterr().err
    assert err.count("is on this machine") == 1
    assert "sending it up to 1 request(s) at a time (an answer was cut short while it was sent more at once" in err


@pytest.mark.parametrize("status, body, said, kind", [
    (429, {"error": {"message": "Rate limit reached"}}, "HTTP 429: Rate limit reached", "rate_limit"),
    (400, {"error": {"code": "invalid_x"}}, "HTTP 400: invalid_x", "client"),
    (503, None, "HTTP 503: None", "server")])
def test_a_batch_lines_http_error_is_said_by_its_status_and_message(status, body, said, kind):
    """An error line reads as `HTTP <status>: <the error's message, else its code>`, classified by
    its status; the whole body is kept for what reads it (a refused response_format, say)."""
    from runner.llm.batch.client import line_outcome
    from runner.llm.client.spec import build_spec
    spec = build_spec("m", {"model": "openai/m", "api_base": "http://127.0.0.1:1/v1"})
    error = line_outcome({"custom_id": "c1", "response": {"status_code": status, "body": body}}, spec)
    assert (str(error), error.kind, error.body) == (said, kind, json.dumps(body))
