"""A fake OpenAI-compatible chat server on 127.0.0.1 for tests and benchmarks.

Scripted answers per model and prompt substring, latency, status codes, Retry-After,
malformed bodies and empty choices; it records every request and the peak number of
requests in flight.

A `personality` mimics a real server's documented behaviour (PERSONALITIES): which
structured-output formats it accepts (the rest get the error that server sends), that it
serves one request at a time, or that it dribbles its answer out byte by byte. A server
that constrains its output only through a format answers prose when it gets none, as a
small local model does."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PROSE = "Sure! After careful thought, I think the claim is mostly fine."
# llama-cpp-python 0.3.36 validates response_format.type with pydantic and answers 500
# (body as recorded against the real server, the file path shortened).
LLAMA_CPP_REJECTION = {"error": {
    "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
               "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
               "'ctx': {'expected': \"'text' or 'json_object'\"}}\n\n  File \"/.../llama_cpp/server/app.py\", "
               "line 376, in create_chat_completion\n    POST /v1/chat/completions",
    "type": "internal_server_error", "param": None, "code": None}}
# llama-cpp-python's answer to a prompt longer than its context: not a format problem.
CONTEXT_EXCEEDED = {"error": {
    "message": "This model's maximum context length is 8192 tokens. However, you requested 9015 tokens (9010 in "
               "the messages, 5 in the completion). Please reduce the length of the messages or completion.",
    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}
LM_STUDIO_REJECTION = {"error": "'response_format.type' must be 'json_schema' or 'text'"}
# `openai-only`: a plain OpenAI-compatible server (no Ollama API) that answers a chat
# completion on any path, as a scripted test server does.
PERSONALITIES = ("llama-cpp-python", "lm-studio", "ollama", "single-slot", "dribble", "openai-only")
STREAMING = ("llama-cpp-python", "lm-studio", "ollama")      # answer `stream: true` with server-sent events


class _Server(ThreadingHTTPServer):
    request_queue_size = 128         # the default 5 drops connections when 16 clients open at once


@dataclass
class Reply:
    content: str | None = "ok"
    status: int = 200
    delay: float = 0.0
    headers: dict[str, Any] = field(default_factory=dict)   # a callable value is computed when sent
    raw_body: str | None = None          # sent as-is instead of a completion
    finish_reason: str = "stop"
    empty_choices: bool = False
    close: bool = False                  # drop the connection without answering


@dataclass
class Rule:
    model: str | None
    contains: str | None
    replies: list[Reply]
    repeat_last: bool = True
    used: int = 0
    when: Callable[[dict[str, Any]], bool] | None = None

    def matches(self, model: str, prompt: str, body: dict[str, Any]) -> bool:
        if self.model is not None and self.model != model:
            return False
        if self.contains is not None and self.contains not in prompt:
            return False
        if self.when is not None and not self.when(body):
            return False
        return self.used < len(self.replies) or self.repeat_last

    def take(self) -> Reply:
        reply = self.replies[min(self.used, len(self.replies) - 1)]
        self.used += 1
        return reply


@dataclass
class Request:
    model: str
    messages: list[dict[str, Any]]
    body: dict[str, Any]
    headers: dict[str, str]
    started: float
    finished: float = 0.0
    status: int = 0
    path: str = ""

    @property
    def prompt(self) -> str:
        if not self.messages and "query" in self.body:      # a search request
            return str(self.body["query"])
        return "\n".join(str(m.get("content", "")) for m in self.messages)


class FakeLLM:
    def __init__(self) -> None:
        self.rules: list[Rule] = []
        self.requests: list[Request] = []          # chat completions only
        self.side_requests: list[Request] = []     # anything else (e.g. Ollama's /api/show)
        self.streamed = 0                          # answers sent as server-sent events
        self.default = Reply("ok")
        self.in_flight = 0
        self.peak_in_flight = 0
        self.personality: str | None = None
        self.dribble_seconds = 0.2           # `dribble`: the pause between two bytes of a body
        self._lock = threading.Lock()
        self._slot = threading.Lock()        # `single-slot`: the one request being served
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # -- scripting -------------------------------------------------------------------
    def script(self, *replies: Reply | str, model: str | None = None, contains: str | None = None,
               repeat_last: bool = True, when: Callable[[dict[str, Any]], bool] | None = None) -> Rule:
        rule = Rule(model, contains, [r if isinstance(r, Reply) else Reply(r) for r in replies], repeat_last,
                    when=when)
        with self._lock:
            self.rules.append(rule)
        return rule

    def answer_json(self, value: Any, **kwargs: Any) -> Rule:
        return self.script(Reply(json.dumps(value)), **kwargs)

    def reset(self) -> None:
        with self._lock:
            self.rules.clear()
            self.requests.clear()
            self.side_requests.clear()
            self.peak_in_flight = 0
            self.personality = None
            self.streamed = 0

    def calls(self, model: str | None = None, contains: str | None = None) -> list[Request]:
        return [r for r in self.requests if (model is None or r.model == model)
                and (contains is None or contains in r.prompt)]

    # -- server ------------------------------------------------------------------------
    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeLLM:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _pick(self, model: str, prompt: str, body: dict[str, Any]) -> Reply:
        with self._lock:
            for rule in self.rules:
                if rule.matches(model, prompt, body):
                    return rule.take()
        return self.default

    def _refusal(self, body: dict[str, Any]) -> tuple[int, str] | None:
        """The error a picky server sends for a response format it does not take."""
        kind = (body.get("response_format") or {}).get("type")
        if self.personality == "llama-cpp-python" and kind not in (None, "text", "json_object"):
            return 500, json.dumps(LLAMA_CPP_REJECTION)
        if self.personality == "lm-studio" and kind not in (None, "text", "json_schema"):
            return 400, json.dumps(LM_STUDIO_REJECTION)
        return None

    def _unconstrained(self, body: dict[str, Any], path: str) -> bool:
        """A small local model given no schema to follow answers prose."""
        if self.personality == "ollama" and path.endswith("/api/chat"):
            return not isinstance(body.get("format"), dict)
        if self.personality in ("llama-cpp-python", "lm-studio", "ollama"):
            return body.get("response_format") is None
        return False

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:  # noqa: N802 - model listing for health checks
                self._send(200, json.dumps({"object": "list", "data": []}))

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                model = str(body.get("model", ""))
                headers = {k.lower(): v for k, v in self.headers.items()}
                request = Request(model, body.get("messages", []), body, headers, time.monotonic(), path=self.path)
                if not self.path.endswith(("/chat/completions", "/api/chat", "/search")):
                    with fake._lock:
                        fake.side_requests.append(request)
                    self._send(200, json.dumps({"model_info": {}, "details": {}, "template": ""}))
                    return
                with fake._lock:
                    fake.requests.append(request)
                    fake.in_flight += 1
                    fake.peak_in_flight = max(fake.peak_in_flight, fake.in_flight)
                single = fake.personality == "single-slot"
                if single:
                    fake._slot.acquire()
                try:
                    refusal = fake._refusal(body)
                    if refusal is not None:
                        request.status = refusal[0]
                        self._send(*refusal)
                        return
                    reply = fake._pick(model, request.prompt, body)
                    if fake._unconstrained(body, self.path):
                        reply = Reply(PROSE, finish_reason=reply.finish_reason)
                    if reply.delay:
                        time.sleep(reply.delay)
                    request.status = reply.status
                    if reply.close:
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    if body.get("stream") and fake.personality in STREAMING and reply.status < 400 \
                            and reply.raw_body is None and self.path.endswith("/chat/completions"):
                        with fake._lock:
                            fake.streamed += 1
                        self._send(200, self._events(reply, model), {"Content-Type": "text/event-stream"})
                        return
                    self._send(reply.status, self._body(reply, model), reply.headers)
                finally:
                    if single:
                        fake._slot.release()
                    request.finished = time.monotonic()
                    with fake._lock:
                        fake.in_flight -= 1

            def _events(self, reply: Reply, model: str) -> str:
                """The answer in three content deltas, then the finish reason, then [DONE]."""
                text = reply.content or ""
                third = max(1, len(text) // 3)
                pieces = [text[i:i + third] for i in range(0, len(text), third)] or [""]
                chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}]
                chunks += [{"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces]
                chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": reply.finish_reason}]})
                lines = [f"data: {json.dumps({'id': 'chatcmpl-fake', 'object': 'chat.completion.chunk', 'model': model, **c})}"
                         for c in chunks]
                return "\n\n".join([*lines, "data: [DONE]"]) + "\n\n"

            def _body(self, reply: Reply, model: str) -> str:
                if reply.raw_body is not None:
                    return reply.raw_body
                if self.path.endswith("/search") and reply.status < 400:     # a search API: the body as scripted
                    return reply.content or json.dumps({"results": []})
                native = self.path.endswith("/api/chat") and fake.personality != "openai-only"
                if native and reply.status < 400:                             # Ollama's native API
                    return json.dumps({"model": model, "created_at": "2026-01-01T00:00:00Z",
                                       "message": {"role": "assistant", "content": reply.content or ""},
                                       "done": True, "done_reason": reply.finish_reason,
                                       "prompt_eval_count": 10, "eval_count": 5})
                if reply.status >= 400:
                    return json.dumps({"error": {"message": f"scripted status {reply.status}",
                                                 "type": "fake_error", "code": reply.status}})
                choices = [] if reply.empty_choices else [{
                    "index": 0, "finish_reason": reply.finish_reason,
                    "message": {"role": "assistant", "content": reply.content}}]
                return json.dumps({"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                                   "model": model, "choices": choices,
                                   "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})

            def _send(self, status: int, text: str, headers: dict[str, str] | None = None) -> None:
                data = text.encode("utf-8")
                headers = dict(headers or {})
                self.send_response(status)
                self.send_header("Content-Type", headers.pop("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value() if callable(value) else value)
                self.end_headers()
                if fake.personality == "dribble":
                    for index in range(len(data)):
                        self.wfile.write(data[index:index + 1])
                        self.wfile.flush()
                        time.sleep(fake.dribble_seconds)
                    return
                self.wfile.write(data)

        return Handler
