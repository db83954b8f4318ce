"""The HTTP transport: OpenAI-compatible chat completions over httpx, one pooled client
per endpoint (LM Studio, llama.cpp, vLLM, Ollama's /v1, OpenAI itself).

It costs a fraction of litellm's import time and per-call CPU; usage and finish reason
come from the response, cost from litellm's price table read as data."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

# httpx imports its command-line tool (click, rich, pygments) with itself; runner never
# runs it, and skipping it saves a tenth of a second or more of every run's start.
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
import httpx  # noqa: E402

from runner.llm.prices import cost_of  # noqa: E402
from runner.llm.spec import OPENAI_BASE, ModelSpec  # noqa: E402
from runner.llm.transport import Completion, TransportError, exception_chain  # noqa: E402
from runner.llm.usage import usage_of  # noqa: E402
from runner.retry import parse_retry_after  # noqa: E402

ERROR_TEXT = 300


def wire_model(model: str) -> str:
    """The model name the server knows: `openai/local-model` is sent as `local-model`."""
    return model.split("/", 1)[1] if model.startswith("openai/") else model


def _error_text(response: httpx.Response) -> str:
    """The server's own message when its error body is JSON, else the body as text."""
    text = response.text
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


def status_error(response: httpx.Response) -> TransportError:
    status = response.status_code
    text = _error_text(response)
    short = text[:ERROR_TEXT]
    if status == 429:
        return TransportError("rate_limit", f"rate limited (429): {short}", 429,
                              parse_retry_after(response.headers.get("retry-after")), body=text)
    if 400 <= status < 500:
        return TransportError("client", f"HTTP {status}: {short}", status, body=text)
    return TransportError("server", f"HTTP {status}: {short}", status,
                          parse_retry_after(response.headers.get("retry-after")), body=text)


def _text(content: Any) -> str | None:
    if isinstance(content, list):        # content parts: keep the text ones
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if content is None or isinstance(content, str) else str(content)


def completion_of(data: Any, spec: ModelSpec) -> Completion:
    if not isinstance(data, dict):
        raise TransportError("server", "the server answered 200 with JSON that is not a chat completion")
    usage = usage_of(data.get("usage"))
    cost = cost_of(spec.model, usage["prompt_tokens"], usage["completion_tokens"])
    model = str(data.get("model") or spec.model)
    choices = data.get("choices") if isinstance(data.get("choices"), list) else []
    if not choices:
        return Completion(None, None, usage, cost, model, 0)
    first = choices[0] if isinstance(choices[0], dict) else {}
    message: dict[str, Any] = first["message"] if isinstance(first.get("message"), dict) else {}
    return Completion(_text(message.get("content")), first.get("finish_reason"), usage, cost, model, len(choices))


class HTTPTransport:
    def __init__(self) -> None:
        self._clients: dict[str, httpx.AsyncClient] = {}

    def _client(self, base: str, timeout: float) -> httpx.AsyncClient:
        client = self._clients.get(base)
        if client is None:
            client = self._clients[base] = httpx.AsyncClient(
                base_url=base, timeout=httpx.Timeout(timeout), trust_env=False,
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=64))
        return client

    @staticmethod
    def _key(spec: ModelSpec) -> str | None:
        if spec.api_key:
            return spec.api_key
        if spec.api_base is None:           # OpenAI itself; a local server never gets this key
            key = os.environ.get("OPENAI_API_KEY")
            if not key:
                raise TransportError("missing_key", "missing API key: set OPENAI_API_KEY")
            return key
        return None

    async def complete(self, spec: ModelSpec, messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        key = self._key(spec)
        body = {**spec.extra, **params, "model": wire_model(spec.model), "messages": messages}
        if spec.local:
            # A local server stops generating when a streaming client leaves; a plain
            # request it runs to the end, holding its one slot long after we timed out.
            body["stream"] = True
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        client = self._client(spec.api_base or OPENAI_BASE, spec.timeout)
        try:
            async with client.stream("POST", "chat/completions", json=body, headers=headers,
                                     timeout=httpx.Timeout(spec.timeout)) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise status_error(response)
                if "text/event-stream" in response.headers.get("content-type", ""):
                    return await streamed(response, spec)
                content = await response.aread()
        except httpx.TimeoutException:
            raise TransportError("timeout", "request timed out") from None
        except httpx.ConnectError as exc:
            chain = exception_chain(exc)
            if "refused" in str(exc).lower() or any(isinstance(e, ConnectionRefusedError) for e in chain):
                raise TransportError("refused", "connection refused") from None
            raise TransportError("connection", f"connection failed: {exc}") from None
        except (httpx.TransportError, OSError) as exc:
            raise TransportError("connection", f"connection failed: {type(exc).__name__}: {exc}") from None
        try:
            data = json.loads(content)
        except ValueError as exc:
            raise TransportError(
                "server", f"HTTP {response.status_code} but the body is not complete JSON ({len(content)} bytes, "
                          f"{exc}): the server or a proxy cut the answer short", response.status_code) from None
        return completion_of(data, spec)

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()



async def streamed(response: httpx.Response, spec: ModelSpec) -> Completion:
    """A server-sent-events answer (`stream: true`) assembled into one completion."""
    parts: list[str] = []
    finish: str | None = None
    usage: dict[str, int] = {}
    model = spec.model
    choices = 0
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            break
        try:
            chunk = json.loads(payload)
        except ValueError as exc:
            raise TransportError("server", f"a streamed chunk is not complete JSON ({exc}): the server or a "
                                           "proxy cut the answer short", response.status_code) from None
        if not isinstance(chunk, dict):
            continue
        if chunk.get("error"):
            raise TransportError("server", f"the server failed mid-answer: {str(chunk['error'])[:ERROR_TEXT]}")
        if isinstance(chunk.get("usage"), dict):
            usage = usage_of(chunk["usage"])
        model = str(chunk.get("model") or model)
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            choices = 1
            delta: dict[str, Any] = choice["delta"] if isinstance(choice.get("delta"), dict) else {}
            if isinstance(delta.get("content"), str):
                parts.append(delta["content"])
            finish = choice.get("finish_reason") or finish
    cost = cost_of(spec.model, usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)) if usage else None
    return Completion("".join(parts) if choices else None, finish, usage, cost, model, choices)
