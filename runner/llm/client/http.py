"""OpenAI-compatible chat completions and embeddings as data: the request body's model name and key, a status
line and body turned into a classified error, a JSON body or a server-sent-events stream
turned into one Completion, and the answer's text made safe to write.

No network here: aio_http.py sends the requests (LM Studio, llama.cpp, vLLM, Ollama's /v1,
OpenAI itself). Cost comes from litellm's price table read as data."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from runner.llm.client.prices import cost_of
from runner.llm.client.spec import ModelSpec
from runner.llm.client.transport import Completion, TransportError, completion_of, embeddings_of, usage_of
from runner.llm.logprobs import Tokens, tokens_of
from runner.retry import parse_retry_after
from runner.safetext import clean_text

ERROR_TEXT = 300


def wire_model(model: str) -> str:
    """The model name the server knows: `openai/local-model` is sent as `local-model`."""
    return model.split("/", 1)[1] if model.startswith("openai/") else model


def api_key(spec: ModelSpec) -> str | None:
    """The key a request carries: the model's own, else OPENAI_API_KEY for OpenAI itself; a
    server at an api_base of one's own (a local one, a gateway) never gets that variable's key."""
    if spec.api_key:
        return spec.api_key
    if spec.api_base is None:
        key = os.environ.get("OPENAI_API_KEY")
        if not key:
            raise TransportError("missing_key", "missing API key: set OPENAI_API_KEY")
        return key
    return None


def too_large(spec: ModelSpec) -> TransportError:
    return TransportError("too_large", f"the answer is over models.{spec.name}.max_response_bytes = "
                                       f"{spec.max_response_bytes} bytes (decompressed): stopped reading it")


def error_text(text: str) -> str:
    """The server's own message when its error body is JSON, else the body as text."""
    try:
        body = json.loads(text)
    except ValueError:
        return text.strip()
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body))
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(error, str):
            return error
        return json.dumps(error, ensure_ascii=False)
    return text.strip()


def redirect_error(status: int, location: str | None) -> TransportError:
    """A 3xx: never followed (a redirect could carry the key elsewhere) and never retried."""
    target = ""
    if location:
        parts = urlsplit(location)       # no credentials or query string in the message
        target = f" to {parts.scheme + '://' if parts.scheme else ''}{parts.hostname or ''}" \
                 f"{':' + str(parts.port) if parts.port else ''}{parts.path}"
    return TransportError("redirect", f"HTTP {status}: the server redirects{target}; runner does not follow "
                                      f"redirects: set api_base to the address that answers", status)


def status_error(status: int, headers: Mapping[str, str], text: str, doing: str = "") -> TransportError:
    """An HTTP error status (400 or more) as a classified error; `doing`: what was asked, said first."""
    message = error_text(text)
    kind = "rate_limit" if status == 429 else "client" if status < 500 else "server"
    said = f"{'rate limited (429)' if status == 429 else f'HTTP {status}'}: {message[:ERROR_TEXT]}"
    retry_after = None if kind == "client" else parse_retry_after(headers.get("retry-after"))
    return TransportError(kind, f"{doing}: {said}" if doing else said, status, retry_after, body=message)


def parse_body(content: bytes, status: int, spec: ModelSpec, embeddings: int | None = None) -> Completion:
    """A JSON body as a chat completion, or, for `embeddings` texts, as their vectors."""
    try:
        data = json.loads(content)
    except ValueError as exc:
        raise TransportError(
            "server", f"HTTP {status} but the body is not complete JSON ({len(content)} bytes, {exc}): the "
                      f"server or a proxy cut the answer short", status) from None
    return completion_of(data, spec) if embeddings is None else embeddings_of(data, spec, embeddings)


class StreamAssembler:
    """A server-sent-events answer (`stream: true`), fed line by line, assembled into one
    completion. Complete only when a finish reason arrived."""

    def __init__(self, spec: ModelSpec, status: int):
        self.spec = spec
        self.status = status
        self.parts: list[str] = []
        self.finish: str | None = None
        self.usage: dict[str, int] = {}
        self.model = spec.model
        self.choices = 0
        self.done = False
        self.tokens: Tokens | None = None        # token logprobs, when the chunks carry them

    def feed(self, line: bytes) -> bool:
        """Take one line; True once `[DONE]` arrived (nothing after it counts)."""
        if not line.startswith(b"data:"):
            return False
        payload = line[5:].strip()
        if payload == b"[DONE]":
            self.done = True
            return True
        try:
            chunk = json.loads(payload.decode("utf-8", "replace"))
        except ValueError as exc:
            raise TransportError("server", f"a streamed chunk is not complete JSON ({exc}): the server or a "
                                           "proxy cut the answer short", self.status) from None
        if not isinstance(chunk, dict):
            return False
        if chunk.get("error"):
            raise TransportError("server", f"the server failed mid-answer: {str(chunk['error'])[:ERROR_TEXT]}")
        if isinstance(chunk.get("usage"), dict):
            self.usage = usage_of(chunk["usage"])
        self.model = str(chunk.get("model") or self.model)
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            self.choices = 1
            delta: dict[str, Any] = choice["delta"] if isinstance(choice.get("delta"), dict) else {}
            if isinstance(delta.get("content"), str):
                self.parts.append(delta["content"])
            tokens = tokens_of(choice.get("logprobs"))
            if tokens is not None:
                self.tokens = self.tokens if self.tokens is not None else []
                self.tokens.extend(tokens)
            self.finish = choice.get("finish_reason") or self.finish
        return False

    def completion(self) -> Completion:
        # `[DONE]` alone is not enough: llama-cpp-python ends an answer it interrupts (another
        # request arrived) with `[DONE]` and no finish reason; every server sends one otherwise.
        if self.finish is None:
            ended = "with [DONE] but no finish_reason" if self.done else "without finish_reason or [DONE]"
            raise TransportError("incomplete", f"the stream ended {ended}: the server stopped the answer "
                                               "(e.g. interrupted it for another request) or a proxy cut it short",
                                 self.status)
        spec, usage = self.spec, self.usage
        cost = cost_of(spec.model, usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)) if usage else None
        # Joined before the surrogates are mended: a pair can arrive split across two chunks.
        text = clean_text("".join(self.parts)) if self.choices else None
        return Completion(text, self.finish, usage, cost, self.model, self.choices, logprobs=self.tokens)
