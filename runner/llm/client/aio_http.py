"""The HTTP transport (`transport: http`): OpenAI-compatible chat completions (and
embeddings, POST {api_base}/embeddings) over one aiohttp session per run (LM Studio,
llama.cpp, vLLM, Ollama's /v1, OpenAI itself).

aiohttp, not httpx: httpx's connection pool took many times the CPU per call with many
calls in flight (bench/throughput.py's httpx floor; figures in bench/RESULTS.md). This
module, and aiohttp with it, is imported on the first uncached call only.

Every body is read through a cap (models.NAME.max_response_bytes, counted after
decompression, while reading); redirects are reported, never followed; no proxy from the
environment is used. The deadline of an attempt is the sender's (`asyncio.timeout` around
`complete`, sender.py): aiohttp keeps no timer of its own."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from yarl import URL

from runner.llm.client.http import (
    ERROR_TEXT,
    StreamAssembler,
    api_key,
    parse_body,
    redirect_error,
    status_error,
    too_large,
    wire_model,
)
from runner.llm.client.spec import OPENAI_BASE, ModelSpec
from runner.llm.client.transport import Completion, TransportError, exception_chain

NO_TIMER = aiohttp.ClientTimeout()          # the sender's asyncio.timeout bounds each attempt


class HTTPTransport:
    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._urls: dict[str, URL] = {}
        self._basic: dict[str, str | None] = {}

    def _client(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop:      # a session serves the loop it was made in
            # limit=0: the run's gates decide how many requests are in flight, not the pool.
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
                                                  trust_env=False)
            self._loop = loop
        return self._session

    def _url(self, spec: ModelSpec, path: str) -> URL:
        base = spec.api_base or OPENAI_BASE
        url = self._urls.get(base + path)
        if url is None:
            # Credentials in the URL travel as the Authorization header (Basic), unless the
            # model has a key (Bearer): aiohttp refuses both at once, httpx let the key win.
            url = self._urls[base + path] = URL(base.rstrip("/") + path).with_user(None)
            self._basic[spec.api_base or ""] = _basic_auth(base)
        return url

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
        key = api_key(spec)
        url = self._url(spec, path)
        headers = {"Content-Type": "application/json"}
        basic = self._basic.get(spec.api_base or "")
        if basic:
            headers["Authorization"] = basic
        if key:
            headers["Authorization"] = f"Bearer {key}"
        try:
            async with self._client().post(url, data=json.dumps(body).encode(), headers=headers,
                                           allow_redirects=False, timeout=NO_TIMER) as response:
                status = response.status
                if 300 <= status < 400:
                    raise redirect_error(status, response.headers.get("location"))
                if status >= 400:
                    text = (await read_capped(response, spec)).decode("utf-8", "replace")
                    raise status_error(status, response.headers, text)
                if embeddings is None and "text/event-stream" in response.headers.get("content-type", ""):
                    return await streamed(response, spec)
                content = await read_capped(response, spec)
        except TransportError:
            raise
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
    chunks = [chunk async for chunk in capped(response, spec)]
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


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


def _basic_auth(base: str) -> str | None:
    """`Basic ...` for `http://user:password@host/...`: how a gateway behind basic auth is reached."""
    parts = URL(base)
    if not parts.user:
        return None
    return aiohttp.encode_basic_auth(parts.user, parts.password or "")
