"""The HTTP transport (`transport: http`): OpenAI-compatible chat completions and embeddings
over one aiohttp session per run (LM Studio, llama.cpp, vLLM, Ollama's /v1, OpenAI itself), and
what it reads: a status as a classified error, a JSON body or a server-sent-events stream as one
Completion (runner.testing's scripted model and the batch client read with these too). aiohttp,
imported on the first request, costs the least CPU per call with many in flight (bench/RESULTS.md).

Every body is read through a cap (models.NAME.max_response_bytes, after decompression);
redirects are reported, never followed; no proxy from the environment is used. An attempt's
deadline is the sender's `asyncio.timeout`: aiohttp keeps no timer of its own."""

from __future__ import annotations

import asyncio
import functools
import json
import os
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from runner.llm.client.prices import cost_of
from runner.llm.client.spec import OPENAI_BASE, ModelSpec
from runner.llm.client.transport import (
    Completion,
    TransportError,
    completion_of,
    embeddings_of,
    exception_chain,
    usage_of,
)
from runner.llm.logprobs import Tokens, tokens_of
from runner.retry import parse_retry_after
from runner.safetext import clean_text

if TYPE_CHECKING:
    import aiohttp
    from yarl import URL

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
    """A server-sent-events answer (`stream: true`), fed line by line, as one completion once a
    finish reason arrived."""

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


class HTTPTransport:
    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _client(self) -> aiohttp.ClientSession:
        import aiohttp
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop:      # a session serves the loop it was made in
            # limit=0: the run's gates decide how many requests are in flight, not the pool.
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
                                                  trust_env=False)
            self._loop = loop
        return self._session

    async def complete(self, spec: ModelSpec, messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        body = {**spec.extra, **params, "model": wire_model(spec.model), "messages": messages}
        if spec.local:
            # A local server stops generating when a streaming client leaves; a plain
            # request it runs to the end, holding its slot long after we timed out.
            body["stream"] = True
        return await self._post(spec, "/chat/completions", body)

    async def embed(self, spec: ModelSpec, texts: list[str], params: dict[str, Any]) -> Completion:
        body = {**spec.extra, **params, "model": wire_model(spec.model), "input": list(texts)}
        return await self._post(spec, "/embeddings", body, embeddings=len(texts))

    async def _post(self, spec: ModelSpec, path: str, body: dict[str, Any],
                    embeddings: int | None = None) -> Completion:
        """POST `body` to the model's api_base + `path`: its answer, or the classified error."""
        import aiohttp
        key = api_key(spec)
        url, basic = _target(spec.api_base or OPENAI_BASE, path)
        headers = {"Content-Type": "application/json"}
        authorization = f"Bearer {key}" if key else basic
        if authorization:
            headers["Authorization"] = authorization
        try:
            # No timer of aiohttp's own (ClientTimeout()): the sender's asyncio.timeout bounds each attempt.
            async with self._client().post(url, data=json.dumps(body).encode(), headers=headers,
                                           allow_redirects=False, timeout=aiohttp.ClientTimeout()) as response:
                status = response.status
                if 300 <= status < 400:
                    raise redirect_error(status, response.headers.get("location"))
                if status >= 400:
                    text = (await read_capped(response, spec)).decode("utf-8", "replace")
                    raise status_error(status, response.headers, text)
                if embeddings is None and "text/event-stream" in response.headers.get("content-type", ""):
                    return await streamed(response, spec)
                content = await read_capped(response, spec)
        except TimeoutError:
            raise TransportError("timeout", "request timed out") from None
        except aiohttp.ClientConnectorError as exc:
            if any(isinstance(e, ConnectionRefusedError) for e in exception_chain(exc)) \
                    or isinstance(exc.os_error, ConnectionRefusedError):
                raise TransportError("refused", "connection refused") from None
            raise TransportError("connection", f"connection failed: {exc}") from None
        except aiohttp.ClientResponseError as exc:     # a status line or headers aiohttp cannot read
            raise TransportError("connection", f"the server's answer is not valid HTTP: "
                                               f"{str(exc.message)[:ERROR_TEXT]}") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise TransportError("connection", f"connection failed: {type(exc).__name__}: "
                                               f"{str(exc)[:ERROR_TEXT]}") from None
        return parse_body(content, status, spec, embeddings)

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and self._loop is asyncio.get_running_loop():
            await session.close()


async def capped(response: aiohttp.ClientResponse, spec: ModelSpec) -> AsyncIterator[bytes]:
    """The body's chunks, decompressed, or TransportError once they pass the model's cap."""
    total = 0
    async for chunk in response.content.iter_any():
        total += len(chunk)
        if total > spec.max_response_bytes:
            raise too_large(spec)
        yield chunk


async def read_capped(response: aiohttp.ClientResponse, spec: ModelSpec) -> bytes:
    """The whole body, decompressed, or TransportError once it passes the model's cap."""
    declared = response.content_length
    if declared is not None and declared > spec.max_response_bytes and not response.headers.get("content-encoding"):
        raise too_large(spec)
    return b"".join([chunk async for chunk in capped(response, spec)])     # one chunk: joined without a copy


async def streamed(response: aiohttp.ClientResponse, spec: ModelSpec) -> Completion:
    """A server-sent-events answer, read line by line under the model's cap."""
    assembler = StreamAssembler(spec, response.status)
    pending = bytearray()           # grows in place: a long line in small pieces stays linear
    async for chunk in capped(response, spec):
        pending += chunk
        if b"\n" not in chunk:
            continue
        *lines, rest = pending.split(b"\n")
        pending = bytearray(rest)
        for line in lines:
            if assembler.feed(bytes(line.rstrip(b"\r"))):
                return assembler.completion()
    if pending:
        assembler.feed(bytes(pending.rstrip(b"\r")))
    return assembler.completion()


@functools.lru_cache(maxsize=256)
def _target(base: str, path: str) -> tuple[URL, str | None]:
    """The URL to post to, and `Basic ...` for a base with credentials (`http://user:password@host/...`:
    a gateway behind basic auth), sent unless the model has a key (Bearer): aiohttp refuses both."""
    import aiohttp
    from yarl import URL
    parts = URL(base)
    basic = aiohttp.encode_basic_auth(parts.user, parts.password or "") if parts.user else None
    return URL(base.rstrip("/") + path).with_user(None), basic
