"""A fake OpenAI-compatible chat server on 127.0.0.1 for tests and benchmarks.

Scripted answers per model and prompt substring, latency, status codes, Retry-After,
malformed bodies and empty choices; it records every request and the peak number of
requests in flight. Its scripting (Script, Reply) is runner.testing's, the
in-process scripted model's: a test moves between the two by changing its fixture.

A `personality` mimics a real server's documented behaviour (PERSONALITIES): which
structured-output formats it accepts (the rest get the error that server sends), that it
serves one request at a time (`single-slot`) or N at a time and says so at /props and /slots
as llama.cpp's server does (`multi-slot`), or that it dribbles its answer out byte by byte. A server
that constrains its output only through a format answers prose when it gets none, as a
small local model does.

A scripted reply may be a function of the request, `(prompt, body) -> Reply | str`: the kinds
of juror in jurors.py are such functions. Asked for `logprobs`, the server answers with the
reply's own token list, else each token of its content at probability 0.99 (jurors.token_logprobs),
unless `logprobs` is false (a server that sends none)."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from jurors import token_logprobs
from runner.testing import GATHER_SECONDS, Reply, Request, Script, completion_body  # the scripting both models share

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
PERSONALITIES = ("llama-cpp-python", "lm-studio", "ollama", "single-slot", "multi-slot", "dribble", "openai-only")
STREAMING = ("llama-cpp-python", "lm-studio", "ollama")      # answer `stream: true` with server-sent events


class _Server(ThreadingHTTPServer):
    request_queue_size = 128         # the default 5 drops connections when 16 clients open at once

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up mid-answer (a timeout under test) is no error of the server's:
        printed, its traceback would land in whatever a test is capturing from stderr then."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def tokens_of(reply: Reply) -> list[dict[str, Any]]:
    return reply.logprobs if reply.logprobs is not None else token_logprobs(reply.content or "")


class FakeLLM(Script):
    def __init__(self) -> None:
        super().__init__()                         # rules; requests: chat completions only
        self.side_requests: list[Request] = []     # anything else (e.g. Ollama's /api/show)
        self.streamed = 0                          # answers sent as server-sent events
        self.personality: str | None = None
        self.logprobs = True                 # token logprobs sent when a request asks for them
        self.dribble_seconds = 0.2           # `dribble`: the pause between two bytes of a body
        self.slots = 4                       # `multi-slot`: requests served at once (the rest queue)
        self.reports_slots = True            # `multi-slot`: say so at /props and /slots (llama.cpp's server)
        # A test's requests are counted in flight apart from those a test before it left behind (a
        # reply it stopped waiting for, still being delayed): each reset starts a new count.
        self._count = 0
        self._slot_gate: tuple[int, threading.Semaphore] | None = None
        self._lock = self.lock                   # the scripting's lock, by the name the handlers use
        self._slot = threading.Lock()        # `single-slot`: the one request being served
        self.batches = FakeBatches(self)     # the Batch API (/v1/files, /v1/batches): its own section below
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # -- scripting: Script's, and what the server adds -----------------------------------
    def reset(self) -> None:
        super().reset()
        with self._lock:
            self.side_requests.clear()
            self.personality = None
            self.streamed = 0
            self.slots = 4
            self.reports_slots = True
            self.logprobs = True
            self.in_flight = 0
            self._count += 1
        self.batches.reset()

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

    def _slot_semaphore(self) -> threading.Semaphore:
        """`multi-slot`: the server's N slots (made again when `slots` changed)."""
        with self._lock:
            if self._slot_gate is None or self._slot_gate[0] != self.slots:
                self._slot_gate = (self.slots, threading.Semaphore(self.slots))
            return self._slot_gate[1]

    def gives_logprobs(self, body: dict[str, Any]) -> bool:
        return self.logprobs and body.get("logprobs") is True

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
            _finishing: Callable[[], None] | None = None

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:  # noqa: N802 - model listing for health checks
                if fake.batches.serves(self.path):
                    self._send(*fake.batches.get(self.path))
                    return
                if fake.personality == "multi-slot" and fake.reports_slots and self.path in ("/props", "/slots"):
                    with fake._lock:
                        fake.side_requests.append(Request("", [], {}, {}, time.monotonic(), path=self.path))
                    if self.path == "/props":       # llama.cpp server's shape, abridged
                        self._send(200, json.dumps({"total_slots": fake.slots, "model_path": "fake.gguf",
                                                    "default_generation_settings": {"n_ctx": 8192}}))
                    else:
                        self._send(200, json.dumps([{"id": n, "is_processing": False} for n in range(fake.slots)]))
                    return
                self._send(200, json.dumps({"object": "list", "data": []}))

            def do_POST(self) -> None:  # noqa: N802
                if fake.batches.serves(self.path):
                    length = int(self.headers.get("Content-Length", 0))
                    self._send(*fake.batches.post(self.path, self.headers.get("Content-Type", ""),
                                                  self.rfile.read(length)))
                    return
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                model = str(body.get("model", ""))
                headers = {k.lower(): v for k, v in self.headers.items()}
                request = Request(model, body.get("messages", []), body, headers, time.monotonic(), path=self.path)
                if not self.path.endswith(("/chat/completions", "/api/chat", "/search", "/embeddings")):
                    with fake._lock:
                        fake.side_requests.append(request)
                    self._send(200, json.dumps({"model_info": {}, "details": {}, "template": ""}))
                    return
                with fake._lock:
                    fake.requests.append(request)
                    count = fake._count
                    fake.in_flight += 1
                    fake.peak_in_flight = max(fake.peak_in_flight, fake.in_flight)
                gather_until = time.monotonic() + GATHER_SECONDS
                while fake.gather and fake.peak_in_flight < fake.gather and time.monotonic() < gather_until:
                    time.sleep(0.005)
                single = fake.personality == "single-slot"
                if single:
                    fake._slot.acquire()
                slots = fake._slot_semaphore() if fake.personality == "multi-slot" else None
                if slots is not None:
                    slots.acquire()

                def finishing() -> None:
                    """Counted out as its last bytes go: a client that reads them and sends its next
                    request at once must not find this one still counted in flight."""
                    if request.finished:
                        return
                    if single:
                        fake._slot.release()
                    if slots is not None:
                        slots.release()
                    request.finished = time.monotonic()
                    with fake._lock:
                        if fake._count == count:
                            fake.in_flight -= 1
                self._finishing = finishing
                try:
                    refusal = fake._refusal(body)
                    if refusal is not None:
                        request.status = refusal[0]
                        self._send(*refusal)
                        return
                    reply = fake.pick(model, request.prompt, body)
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
                        self._send(200, self._events(reply, model, fake.gives_logprobs(body)),
                                   {"Content-Type": "text/event-stream"})
                        return
                    self._send(reply.status, self._body(reply, model, fake.gives_logprobs(body)), reply.headers)
                finally:
                    finishing()
                    self._finishing = None

            def _events(self, reply: Reply, model: str, logprobs: bool) -> str:
                """The answer in three content deltas (one per token, with its logprobs, when
                asked for them), then the finish reason, then [DONE]."""
                text = reply.content or ""
                chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}]
                if logprobs:
                    chunks += [{"choices": [{"index": 0, "delta": {"content": t["token"]}, "finish_reason": None,
                                             "logprobs": {"content": [t]}}]} for t in tokens_of(reply)]
                else:
                    third = max(1, len(text) // 3)
                    pieces = [text[i:i + third] for i in range(0, len(text), third)] or [""]
                    chunks += [{"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]}
                               for p in pieces]
                chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": reply.finish_reason}]})
                lines = [f"data: {json.dumps({'id': 'chatcmpl-fake', 'object': 'chat.completion.chunk', 'model': model, **c})}"
                         for c in chunks]
                return "\n\n".join([*lines, "data: [DONE]"]) + "\n\n"

            def _body(self, reply: Reply, model: str, logprobs: bool) -> str:
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
                return completion_body(reply, model, tokens_of(reply) if logprobs else None)

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
                        if index == len(data) - 1 and self._finishing is not None:
                            self._finishing()
                        self.wfile.write(data[index:index + 1])
                        self.wfile.flush()
                        time.sleep(fake.dribble_seconds)
                    return
                if self._finishing is not None:
                    self._finishing()
                self.wfile.write(data)

        return Handler


# -- the Batch API -------------------------------------------------------------------------
# OpenAI's, as documented: a JSONL file uploaded (multipart, purpose=batch) to /v1/files;
# /v1/batches create, retrieve, list and cancel; each retrieve moves a batch one status on
# (validating, in_progress, finalizing, completed) unless `hold` keeps it in progress; a
# file whose lines name more than one model fails validation with `errors`. Each line is
# answered by the same rules as a live call (scripts, refusals, personalities); successes go
# to the output file, other statuses and unanswered lines to the error file.

BATCH_STEPS = ("validating", "in_progress", "finalizing", "completed")
UNFINISHED = {"expired": ("batch_expired", "This request could not be executed before the completion window "
                                           "expired."),
              "cancelled": ("batch_cancelled", "This request was not executed because the batch was cancelled.")}


@dataclass
class FakeBatch:
    id: str
    input_file_id: str
    lines: list[dict[str, Any]]
    metadata: dict[str, Any]
    status: str = "validating"
    outcome: str = "completed"             # where it ends: completed, expired, cancelled or failed
    errors: list[dict[str, Any]] = field(default_factory=list)
    output_file_id: str | None = None
    error_file_id: str | None = None
    polls: int = 0
    answered: int = 0
    failed: int = 0
    created_at: int = field(default_factory=lambda: int(time.time()))

    @property
    def model(self) -> str:
        return str((self.lines[0].get("body") or {}).get("model", "")) if self.lines else ""

    def view(self) -> dict[str, Any]:
        done = self.answered if self.status in ("completed", "expired", "cancelled") else 0
        return {"id": self.id, "object": "batch", "endpoint": "/v1/chat/completions",
                "errors": {"object": "list", "data": self.errors} if self.errors else None,
                "input_file_id": self.input_file_id, "completion_window": "24h", "status": self.status,
                "output_file_id": self.output_file_id, "error_file_id": self.error_file_id,
                "created_at": self.created_at, "metadata": self.metadata,
                "request_counts": {"total": len(self.lines), "completed": done, "failed": self.failed}}


class FakeBatches:
    def __init__(self, fake: FakeLLM):
        self.fake = fake
        self.hold = False                      # batches stay in_progress while true
        self.outcomes: list[str] = []          # how the next batches end (expired, cancelled, failed)
        self.reset()

    def reset(self) -> None:
        self.files: dict[str, tuple[str, bytes]] = {}        # id -> (purpose, content)
        self.batches: dict[str, FakeBatch] = {}
        self.requests: list[Request] = []                    # every line answered
        self.uploads: list[dict[str, str]] = []              # multipart fields of each upload (no content)
        self.hold = False
        self.outcomes = []
        self.enabled = True                    # false: no Batch API here (404, as llama.cpp or LM Studio)
        self.refusals: list[int] = []          # statuses for the next batch creations (429: queue full)
        self.failing_polls = 0                 # the next retrieves answer 503
        # A broken gateway's output file: its answer lines, changed before they are written
        # (a line given twice, an answer from another model).
        self.edit_output: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None
        self._ids = 0

    def created(self, model: str | None = None) -> list[FakeBatch]:
        return [b for b in self.batches.values() if model is None or b.model == model]

    def forget(self) -> list[str]:
        """The provider forgets every batch (deleted, another organisation's key, a gateway
        restarted): retrieve and cancel answer 404 for them, the listing no longer has them.
        Their ids."""
        with self.fake._lock:
            gone = list(self.batches)
            self.batches.clear()
        return gone

    @staticmethod
    def serves(path: str) -> bool:
        return "/files" in path or "/batches" in path

    def _id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}-{self._ids:04d}"

    # -- HTTP -------------------------------------------------------------------------------
    def post(self, path: str, content_type: str, data: bytes) -> tuple[int, str]:
        if not self.enabled:
            return _not_found("route")
        with self.fake._lock:
            if path.rstrip("/").endswith("/files"):
                return self._upload(content_type, data)
            if path.rstrip("/").endswith("/batches"):
                if self.refusals:
                    return self.refusals.pop(0), json.dumps({"error": {
                        "message": "Enqueued token limit reached for this model in your organization.",
                        "type": "invalid_request_error", "code": "token_limit_exceeded"}})
                return self._create(json.loads(data or b"{}"))
            if path.endswith("/cancel"):
                batch = self.batches.get(path.split("/")[-2])
                if batch is None:
                    return _not_found("batch")
                if batch.status not in ("completed", "failed", "expired", "cancelled"):
                    batch.status, batch.outcome = "cancelling", "cancelled"
                return 200, json.dumps(batch.view())
        return _not_found("route")

    def get(self, path: str) -> tuple[int, str]:
        if not self.enabled:
            return _not_found("route")
        with self.fake._lock:
            route = path.split("?")[0].rstrip("/")
            if route.endswith("/batches"):
                data = [b.view() for b in reversed(self.batches.values())]
                return 200, json.dumps({"object": "list", "data": data, "has_more": False})
            if "/files/" in route and route.endswith("/content"):
                found = self.files.get(route.split("/")[-2])
                return (200, found[1].decode("utf-8")) if found else _not_found("file")
            batch = self.batches.get(route.split("/")[-1])
            if batch is None:
                return _not_found("batch")
            if self.failing_polls:
                self.failing_polls -= 1
                return 503, json.dumps({"error": {"message": "The server is overloaded.", "type": "server_error"}})
            self._advance(batch)
            return 200, json.dumps(batch.view())

    def _upload(self, content_type: str, data: bytes) -> tuple[int, str]:
        fields = _multipart(content_type, data)
        purpose = fields.get("purpose", (None, b""))[1].decode()
        if purpose != "batch" or "file" not in fields:
            return 400, json.dumps({"error": {"message": "a batch file needs purpose=batch and a file",
                                              "type": "invalid_request_error"}})
        file_id = self._id("file")
        self.files[file_id] = (purpose, fields["file"][1])
        self.uploads.append({"purpose": purpose, "filename": fields["file"][0] or ""})
        return 200, json.dumps({"id": file_id, "object": "file", "purpose": purpose, "bytes": len(fields["file"][1]),
                                "filename": fields["file"][0]})

    def _create(self, body: dict[str, Any]) -> tuple[int, str]:
        found = self.files.get(str(body.get("input_file_id")))
        if found is None:
            return _not_found("file")
        lines = [json.loads(line) for line in found[1].decode("utf-8").splitlines() if line.strip()]
        batch = FakeBatch(self._id("batch"), str(body["input_file_id"]), lines, body.get("metadata") or {})
        models = sorted({str((line.get("body") or {}).get("model")) for line in lines})
        if len(models) > 1:
            batch.outcome = "failed"
            batch.errors = [{"code": "model_mismatch", "line": None, "param": "body.model",
                             "message": f"The batch input file contains requests for more than one model "
                                        f"({', '.join(models)}); every request in a batch must use the same model."}]
        elif self.outcomes:
            batch.outcome = self.outcomes.pop(0)
            if batch.outcome == "failed":
                batch.errors = [{"code": "invalid_request", "line": 1, "param": None,
                                 "message": "scripted failure of the whole batch"}]
        self.batches[batch.id] = batch
        return 200, json.dumps(batch.view())

    # -- the life of a batch ---------------------------------------------------------------------
    def _advance(self, batch: FakeBatch) -> None:
        batch.polls += 1
        if batch.status in ("completed", "failed", "expired", "cancelled"):
            return
        if batch.status == "cancelling":
            self._end(batch, "cancelled")
        elif batch.status == "validating":
            if batch.outcome == "failed":
                batch.status = "failed"
            else:
                batch.status = "in_progress"
        elif batch.status == "in_progress" and not self.hold:
            batch.status = "finalizing" if batch.outcome == "completed" else batch.status
            if batch.outcome in UNFINISHED:
                self._end(batch, batch.outcome)
        elif batch.status == "finalizing":
            self._end(batch, "completed")

    def _end(self, batch: FakeBatch, status: str) -> None:
        output, errors = [], []
        for line in batch.lines:
            if status in UNFINISHED:
                code, message = UNFINISHED[status]
                errors.append({"id": self._id("batch_req"), "custom_id": line["custom_id"], "response": None,
                               "error": {"code": code, "message": message}})
                continue
            code, text = self._answer(line.get("body") or {})
            try:
                answer: Any = json.loads(text)
            except ValueError:
                answer = text
            entry = {"id": self._id("batch_req"), "custom_id": line["custom_id"],
                     "response": {"status_code": code, "request_id": self._id("req"), "body": answer}, "error": None}
            (output if code < 400 else errors).append(entry)
        if self.edit_output is not None:
            output = self.edit_output(output)
        batch.answered, batch.failed = len(output), len(errors)
        batch.output_file_id = self._file(output)
        batch.error_file_id = self._file(errors)
        batch.status = status

    def _file(self, lines: list[dict[str, Any]]) -> str | None:
        if not lines:
            return None
        file_id = self._id("file")
        self.files[file_id] = ("batch_output", "".join(json.dumps(line) + "\n" for line in lines).encode("utf-8"))
        return file_id

    def _answer(self, body: dict[str, Any]) -> tuple[int, str]:
        """A line answered as the live route answers the same body (the lock is held)."""
        model = str(body.get("model", ""))
        request = Request(model, body.get("messages", []), body, {}, time.monotonic(), path="batch")
        self.requests.append(request)
        refusal = self.fake._refusal(body)
        if refusal is not None:
            return refusal
        reply = None
        for rule in self.fake.rules:
            if rule.matches(model, request.prompt, body):
                reply = rule.take(request.prompt, body)
                break
        reply = reply or self.fake.default
        if self.fake._unconstrained(body, "/v1/chat/completions"):
            reply = Reply(PROSE, finish_reason=reply.finish_reason)
        if reply.close:
            return 500, json.dumps({"error": {"message": "the server closed the connection", "type": "server_error"}})
        request.status = reply.status
        return reply.status, (reply.raw_body if reply.raw_body is not None
                              else completion_body(reply, model, tokens_of(reply) if self.fake.gives_logprobs(body) else None))


def _not_found(what: str) -> tuple[int, str]:
    return 404, json.dumps({"error": {"message": f"no such {what}", "type": "invalid_request_error"}})


def _multipart(content_type: str, data: bytes) -> dict[str, tuple[str | None, bytes]]:
    """name -> (filename, content) of a multipart/form-data body."""
    boundary = content_type.split("boundary=", 1)[-1].strip().strip('"').encode()
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in data.split(b"--" + boundary):
        head, _, content = part.partition(b"\r\n\r\n")
        disposition = head.decode("utf-8", "replace")
        if "name=" not in disposition:
            continue
        name = disposition.split('name="', 1)[1].split('"', 1)[0]
        filename = disposition.split('filename="', 1)[1].split('"', 1)[0] if 'filename="' in disposition else None
        fields[name] = (filename, content[:-2] if content.endswith(b"\r\n") else content)
    return fields
