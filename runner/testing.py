"""An in-process scripted model for tests, yours and runner's own (as inspect_ai's `mockllm`).

A `ScriptedModel` is a transport (runner/llm/client/transport.py) that answers by rules
instead of over the network:

    from runner.testing import Reply, ScriptedModel

    model = ScriptedModel().install()               # models named scripted/... now come here
    model.answer_json({"verdict": "yes"}, contains="Claim 1")
    model.script(Reply(status=503), Reply('{"verdict": "no"}'))   # then: a 503, then an answer
    # run the pipeline with `--set models.judge.model=scripted/judge` (and no api_base) ...
    assert model.calls(contains="Claim 1")[0].body["response_format"]["type"] == "json_schema"
    model.uninstall()
    model.answer_embeddings({"a cat": [1.0, 0.0], "a dog": [0.6, 0.8]})   # embeddings requests, by text

Rules match by model name (the part after `scripted/`), prompt substring and any test of the
request body; the first that matches answers, each of its replies in turn (the last again while
`repeat_last`); no rule: `default`. A reply becomes the answer or error as the HTTP transport
makes a server's (runner/llm/client/http.py), so retries, breakers and fallbacks behave as
against a server. It records every request (`requests`, `calls()`) and `peak_in_flight`;
`hold()` keeps every answer back until `release()`; `gather = n` holds the first answers (at
most GATHER_SECONDS) until n requests were in flight at once, so a test of a concurrency cap
reaches it however slowly a loaded machine sends them. Worker processes and Ray actors do not
see it (test those against a server)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.llm.client.http import parse_body, redirect_error, status_error, too_large
from runner.llm.client.routing import register_transport, unregister_transport
from runner.llm.client.spec import ModelSpec
from runner.llm.client.transport import Completion, TransportError

PROVIDER = "scripted"
GATHER_SECONDS = 30.0


@dataclass
class Reply:
    content: str | None = "ok"
    status: int = 200
    delay: float = 0.0                   # seconds before it answers
    headers: dict[str, Any] = field(default_factory=dict)   # a callable value is computed when sent
    raw_body: str | None = None          # sent as-is instead of a completion
    finish_reason: str = "stop"
    empty_choices: bool = False
    close: bool = False                  # drop the connection without answering
    logprobs: list[dict[str, Any]] | None = None    # `choices[0].logprobs.content` when the request asks


Behaviour = Callable[[str, dict[str, Any]], "Reply | str"]      # (prompt, body) -> the answer


@dataclass
class Rule:
    model: str | None
    contains: str | None
    replies: list[Reply | Behaviour]
    repeat_last: bool = True
    used: int = 0
    when: Callable[[dict[str, Any]], bool] | None = None

    def matches(self, model: str, prompt: str, body: dict[str, Any]) -> bool:
        return ((self.model is None or self.model == model) and (self.contains is None or self.contains in prompt)
                and (self.when is None or self.when(body)) and (self.used < len(self.replies) or self.repeat_last))

    def take(self, prompt: str, body: dict[str, Any]) -> Reply:
        reply = self.replies[min(self.used, len(self.replies) - 1)]
        self.used += 1
        if callable(reply):
            answer = reply(prompt, body)
            return answer if isinstance(answer, Reply) else Reply(answer)
        return reply


@dataclass
class Request:
    model: str
    messages: list[dict[str, Any]]
    body: dict[str, Any]                 # as a server would get it: params, response_format, model, messages
    headers: dict[str, str]
    started: float
    finished: float = 0.0
    status: int = 0
    path: str = ""

    @property
    def prompt(self) -> str:
        if not self.messages and "query" in self.body:      # a search request
            return str(self.body["query"])
        if not self.messages and isinstance(self.body.get("input"), list):      # an embeddings request
            return "\n".join(str(text) for text in self.body["input"])
        return "\n".join(str(m.get("content", "")) for m in self.messages)


def completion_body(reply: Reply, model: str, logprobs: list[dict[str, Any]] | None = None) -> str:
    """A chat completion (or the error a scripted status sends) as JSON text, with these token logprobs if given."""
    if reply.status >= 400:
        return json.dumps({"error": {"message": f"scripted status {reply.status}",
                                     "type": "fake_error", "code": reply.status}})
    choices = [] if reply.empty_choices else [{
        "index": 0, "finish_reason": reply.finish_reason,
        "message": {"role": "assistant", "content": reply.content},
        "logprobs": {"content": logprobs, "refusal": None} if logprobs is not None else None}]
    return json.dumps({"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                       "model": model, "choices": choices,
                       "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})


def embeddings_body(vectors: list[list[float]], model: str) -> str:
    """An /embeddings answer of these vectors, as JSON text."""
    tokens = 3 * len(vectors)
    return json.dumps({"object": "list", "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                       "data": [{"object": "embedding", "index": n, "embedding": v} for n, v in enumerate(vectors)]})


class Script:
    """Rules and what they were asked: the scripting a scripted model shares with a test's
    fake server. `lock` guards rules and records: a run's loop may not be the test's thread."""

    def __init__(self) -> None:
        self.rules: list[Rule] = []
        self.requests: list[Request] = []
        self.default = Reply("ok")
        self.in_flight = 0
        self.peak_in_flight = 0
        self.gather: int | None = None
        self.lock = threading.Lock()

    def script(self, *replies: Reply | str | Behaviour, model: str | None = None, contains: str | None = None,
               repeat_last: bool = True, when: Callable[[dict[str, Any]], bool] | None = None) -> Rule:
        rule = Rule(model, contains, [Reply(r) if isinstance(r, str) else r for r in replies], repeat_last,
                    when=when)
        with self.lock:
            self.rules.append(rule)
        return rule

    def answer_json(self, value: Any, **kwargs: Any) -> Rule:
        return self.script(Reply(json.dumps(value)), **kwargs)

    def answer_embeddings(self, vectors: Mapping[str, list[float]] | Callable[[str], list[float]],
                          **kwargs: Any) -> Rule:
        """Answer embeddings requests (and only those) with each text's vector: from the mapping
        (a text it lacks: a 400 naming it) or the function."""
        def reply(_: str, body: dict[str, Any]) -> Reply:
            texts = [str(text) for text in body["input"]]
            if missing := [text for text in texts if not callable(vectors) and text not in vectors]:
                return Reply(status=400, raw_body=json.dumps({"error": {"message": f"no vector for {missing[0]!r}"}}))
            found = [vectors(text) if callable(vectors) else vectors[text] for text in texts]
            return Reply(raw_body=embeddings_body(found, str(body.get("model", ""))))
        return self.script(reply, when=lambda body: "input" in body and "messages" not in body, **kwargs)

    def calls(self, model: str | None = None, contains: str | None = None) -> list[Request]:
        return [r for r in self.requests if (model is None or r.model == model)
                and (contains is None or contains in r.prompt)]

    def reset(self) -> None:
        with self.lock:
            self.rules.clear()
            self.requests.clear()
            self.default = Reply("ok")
            self.peak_in_flight = 0
            self.gather = None

    def pick(self, model: str, prompt: str, body: dict[str, Any]) -> Reply:
        """The reply of the first rule that matches, else `default`."""
        with self.lock:
            for rule in self.rules:
                if rule.matches(model, prompt, body):
                    return rule.take(prompt, body)
        return self.default


class ScriptedModel(Script):
    """A transport that answers by rules; `install()` routes `scripted/...` models to it."""

    def __init__(self, provider: str = PROVIDER) -> None:
        super().__init__()
        self.provider = provider
        self.held: asyncio.Event | None = None

    # -- where it answers ------------------------------------------------------------------
    def install(self) -> ScriptedModel:
        """Answer the models named `<provider>/...` of every run in this process."""
        register_transport(self.provider, lambda: self)
        return self

    def uninstall(self) -> None:
        unregister_transport(self.provider)

    # -- what is in flight ---------------------------------------------------------------------
    def hold(self) -> None:
        """Keep every answer back until `release()`: the requests stay in flight, for tests
        of what happens meanwhile (two requests for one answer, a cancel, a shutdown)."""
        self.held = asyncio.Event()

    def release(self) -> None:
        if self.held is not None:
            self.held.set()

    # -- the transport -----------------------------------------------------------------------
    async def complete(self, spec: ModelSpec, messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        model = spec.model.split("/", 1)[-1]
        # What a server would read: a copy through JSON, as the HTTP transport sends it.
        body = json.loads(json.dumps({**spec.extra, **params, "model": model, "messages": messages}))
        request = Request(model, body["messages"], body, {}, time.monotonic(), path=self.provider)
        return await self._answer(request, lambda reply: answer(
            reply, model, spec, reply.logprobs if body.get("logprobs") is True else None))

    async def embed(self, spec: ModelSpec, texts: list[str], params: dict[str, Any]) -> Completion:
        """An embeddings request, answered by the rules as a server's /embeddings would be."""
        model = spec.model.split("/", 1)[-1]
        body = json.loads(json.dumps({**spec.extra, **params, "model": model, "input": texts}))
        request = Request(model, [], body, {}, time.monotonic(), path=f"{self.provider}/embeddings")
        return await self._answer(request, lambda reply: answer(reply, model, spec, embeddings=len(texts)))

    async def _answer(self, request: Request, make: Callable[[Reply], Completion]) -> Completion:
        """The reply the rules pick for `request` (recorded, held, delayed as scripted), made the answer by `make`."""
        with self.lock:
            self.requests.append(request)
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            gather_until = time.monotonic() + GATHER_SECONDS
            while self.gather and self.peak_in_flight < self.gather and time.monotonic() < gather_until:
                await asyncio.sleep(0.005)
            if self.held is not None:
                await self.held.wait()
            reply = self.pick(request.model, request.prompt, request.body)
            if reply.delay:
                await asyncio.sleep(reply.delay)
            request.status = reply.status
            return make(reply)
        finally:
            request.finished = time.monotonic()
            with self.lock:
                self.in_flight -= 1

    async def aclose(self) -> None:
        """Nothing to close: the model outlives the runs it answers."""


def answer(reply: Reply, model: str, spec: ModelSpec, logprobs: list[dict[str, Any]] | None = None,
           embeddings: int | None = None) -> Completion:
    """The completion (or the vectors of `embeddings` texts), or the error, the HTTP transport makes of this reply."""
    if reply.close:
        raise TransportError("connection", "connection failed: the server closed the connection without answering")
    headers = {key.lower(): str(value() if callable(value) else value) for key, value in reply.headers.items()}
    text = reply.raw_body if reply.raw_body is not None else completion_body(reply, model, logprobs)
    if 300 <= reply.status < 400:
        raise redirect_error(reply.status, headers.get("location"))
    if len(text.encode("utf-8")) > spec.max_response_bytes:
        raise too_large(spec)
    if reply.status >= 400:
        raise status_error(reply.status, headers, text)
    return parse_body(text.encode("utf-8"), reply.status, spec, embeddings)
