"""The transport: model spec + messages + params in; text, finish reason, usage, cost out. An
embeddings request (texts in, one vector each out) is a Completion too, its vectors beside a
one-line text saying what they are (what calls.jsonl and the cache show).

litellm is imported here only, on the first real call. One reading of an OpenAI-shaped answer
(`completion_of`, `embeddings_of`) serves the HTTP transport, batch lines and litellm's responses."""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from runner.llm.client.prices import cost_of
from runner.llm.client.spec import OLLAMA_DEFAULT_BASE, ModelSpec
from runner.llm.logprobs import tokens_of
from runner.retry import parse_retry_after
from runner.safetext import clean_text

RETRYABLE = {"rate_limit", "server", "timeout", "connection", "incomplete"}
NO_KEY_PLACEHOLDER = "no-key-needed"
USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")
MAX_TOKENS_COUNTED = 2**53          # past any real answer, and still exact as a float in JSON


@dataclass
class Completion:
    text: str | None
    finish_reason: str | None
    usage: dict[str, int] = field(default_factory=dict)
    cost: float | None = 0.0            # None: the price table does not know the model
    model: str = ""
    choices: int = 1
    attempts: int = 1                  # requests it took (set by the service's retry loop)
    logprobs: list[list[Any]] | None = None     # [[token, logprob], ...] when the answer carries them
    vectors: list[list[float]] | None = None    # an embeddings answer: one vector per text, in order

    def problem(self, model: str, max_tokens: Any) -> str | None:
        """Why this answer cannot be used (no choices, cut short, filtered, empty), with the fix; None if usable."""
        if self.choices == 0:
            return "the answer has no choices"
        if self.finish_reason == "length":
            return (f"the answer was truncated (finish_reason=length) at max_tokens={max_tokens}: raise it with "
                    f"`max_tokens:` on the step or on the model (--set models.{model}.max_tokens="
                    f"{2 * int(max_tokens or 1024)}), or ask for a shorter answer")
        if self.finish_reason == "content_filter":
            return "the provider's content filter stopped the answer (finish_reason=content_filter)"
        if self.text is None or not self.text.strip():
            return "the answer is empty"
        return None


class TransportError(Exception):
    """A failed request, classified: `kind` decides retry and the breaker."""

    def __init__(self, kind: str, message: str, status: int | None = None, retry_after: float | None = None,
                 body: str = "", attempts: int = 0):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.body = body or message      # the server's whole error text: says whether it rejects a format
        self.attempts = attempts           # requests sent before it gave up

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE

    @property
    def opens_breaker(self) -> bool:
        return self.kind in ("refused", "missing_key")


class Transport(Protocol):
    async def complete(self, spec: ModelSpec, messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion: ...

    async def embed(self, spec: ModelSpec, texts: list[str], params: dict[str, Any]) -> Completion:
        """The embeddings of `texts` (Completion.vectors, one per text, in order)."""
        ...

    async def aclose(self) -> None: ...


def token_count(value: Any) -> int:
    """A `usage` field as a count: a server may send "12.5", [1], 1e400 or -3 where a count
    belongs; such a field is unknown (0), never an error that would lose a good answer."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value if 0 <= value <= MAX_TOKENS_COUNTED else 0
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and 0 <= value <= MAX_TOKENS_COUNTED else 0
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 16:
        return int(value)
    return 0


def usage_of(raw: Any) -> dict[str, int]:
    """The three counts of a `usage` mapping."""
    source = raw if isinstance(raw, dict) else {}
    return {key: token_count(source.get(key)) for key in USAGE_KEYS}


def _text(content: Any) -> str | None:
    if isinstance(content, list):        # content parts: keep the text ones
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    elif content is not None and not isinstance(content, str):
        content = str(content)
    return None if content is None else clean_text(content)


def completion_of(data: Any, spec: ModelSpec, cost: float | None = None) -> Completion:
    """A chat completion's JSON as a Completion; `cost`: litellm's own figure, else the price table's."""
    if not isinstance(data, dict):
        raise TransportError("server", "the server answered 200 with JSON that is not a chat completion")
    usage = usage_of(data.get("usage"))
    if cost is None:
        cost = cost_of(spec.model, usage["prompt_tokens"], usage["completion_tokens"])
    model = str(data.get("model") or spec.model)
    choices = data.get("choices") if isinstance(data.get("choices"), list) else []
    if not choices:
        return Completion(None, None, usage, cost, model, 0)
    first = choices[0] if isinstance(choices[0], dict) else {}
    message: dict[str, Any] = first["message"] if isinstance(first.get("message"), dict) else {}
    return Completion(_text(message.get("content")), first.get("finish_reason"), usage, cost, model, len(choices),
                      logprobs=tokens_of(first.get("logprobs")))


def embeddings_of(data: Any, spec: ModelSpec, count: int, cost: float | None = None) -> Completion:
    """An /embeddings answer ({data: [{index, embedding}], usage, model}) for `count` texts; `cost`:
    litellm's own figure, else the table's."""
    if not isinstance(data, dict):
        raise TransportError("server", "the server answered 200 with JSON that is not an embeddings answer")
    vectors = vector_list(data.get("data"), count)
    usage = usage_of(data.get("usage"))
    cost = cost_of(spec.model, usage["prompt_tokens"], 0) if cost is None else cost
    size = len(vectors[0]) if vectors else 0
    return Completion(f"{len(vectors)} embedding(s) of {size} dimensions", "stop", usage, cost,
                      str(data.get("model") or spec.model), len(vectors), vectors=vectors)


def vector_list(data: Any, count: int) -> list[list[float]]:
    """The vectors of an embeddings answer's `data`, in the order of the texts; TransportError when
    they are not `count` lists of finite numbers."""
    items = data if isinstance(data, list) else []
    try:
        ordered = sorted(items, key=lambda entry: int(entry.get("index", 0)))
        vectors = [[float(x) for x in entry["embedding"]] for entry in ordered]
    except (AttributeError, KeyError, TypeError, ValueError):
        vectors = []
    if len(vectors) != count or any(not vector or not all(map(math.isfinite, vector)) for vector in vectors):
        raise TransportError("server", f"the embeddings answer does not hold {count} vector(s) of finite numbers "
                                       "(data: [{index, embedding}, ...])")
    return vectors


@functools.cache           # set up once a process (an import that failed is tried again)
def import_litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ["LITELLM_MODE"] = "PRODUCTION"   # stops litellm loading a .env file
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    # litellm prints banners on import and on errors; none of it may reach stdout.
    with contextlib.redirect_stdout(io.StringIO()):
        import litellm
    litellm.suppress_debug_info = True
    litellm.set_verbose = False
    return litellm


def exception_chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 12:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


_LITELLM_PREFIX = re.compile(r"^(?:litellm\.[\w.]*(?:Error|Exception)\s*:\s*)+")
# What litellm's Ollama handlers raise when the answer is not Ollama's (an OpenAI-shaped body).
OLLAMA_SHAPE = "argument after ** must be a mapping"


def first_line(text: str) -> str:
    """A library's error text without the traceback litellm embeds in its messages, and
    without its `litellm.SomeError:` prefixes: one line a user can read."""
    head = text.split("Traceback (most recent call last)", 1)[0]
    line = next((part.strip() for part in head.splitlines() if part.strip()), "")
    return _LITELLM_PREFIX.sub("", line) or "(no message)"


def classify(exc: BaseException) -> TransportError:
    """Map a litellm/openai/httpx exception to a TransportError."""
    chain = exception_chain(exc)
    text = first_line(str(exc))
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return TransportError("refused", "connection refused")
    status = getattr(exc, "status_code", None)
    headers = getattr(exc, "litellm_response_headers", None) or getattr(getattr(exc, "response", None), "headers", None)
    retry_after = parse_retry_after(headers.get("retry-after") if headers is not None else None)
    name = type(exc).__name__
    if "Missing credentials" in text or "api_key" in text and "must be set" in text:
        return TransportError("missing_key", "missing API key", status)
    if name == "Timeout" or any(type(e).__name__ in ("TimeoutError", "ReadTimeout", "APITimeoutError") for e in chain):
        return TransportError("timeout", "request timed out", status)
    short = text.split(" - ", 1)[-1].strip()[:300]
    if any(isinstance(e, json.JSONDecodeError) for e in chain) or "Expecting value" in text:
        return TransportError("server", f"the server's answer is not complete JSON (cut short?): {short}", status)
    if status == 429:
        return TransportError("rate_limit", f"rate limited (429): {short}", 429, retry_after, body=text)
    if status in (400, 401, 403, 404, 422):
        return TransportError("client", f"HTTP {status}: {short}", status, body=text)
    if any(type(e).__name__ in ("ConnectError", "ClientConnectorError", "RemoteProtocolError", "ReadError",
                                "ServerDisconnectedError", "ClientOSError", "ConnectionResetError")
           for e in chain) or "Connection error" in text:
        return TransportError("connection", f"connection failed: {short}", status)
    if status is not None and status >= 500:
        return TransportError("server", f"HTTP {status}: {short}", status, retry_after, body=text)
    return TransportError("other", f"{name}: {short}", status)


class LiteLLMTransport:
    def __init__(self) -> None:
        self._litellm: Any = None

    def _ensure(self) -> Any:
        try:
            self._litellm = import_litellm()        # once a process: functools.cache
        except Exception as exc:  # ImportError or anything litellm raises on import
            raise TransportError("import", f"litellm cannot be imported: {type(exc).__name__}: {exc}") from None
        return self._litellm

    async def complete(self, spec: ModelSpec, messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        response = await self._send(spec, "acompletion", params, messages=copy.deepcopy(messages), max_retries=0)
        return completion_of(_dumped(response), spec, _cost(response))

    async def embed(self, spec: ModelSpec, texts: list[str], params: dict[str, Any]) -> Completion:
        response = await self._send(spec, "aembedding", params, input=list(texts))
        return embeddings_of(_dumped(response), spec, len(texts), _cost(response))

    async def _send(self, spec: ModelSpec, method: str, params: dict[str, Any], **request: Any) -> Any:
        """litellm's `method` for a request of `spec`: its response, or the classified error. It gets
        copies (a provider's adapter may rewrite them; every call of a step shares its schema)."""
        litellm = self._ensure()
        if not (spec.api_key or spec.api_base):        # a hosted model: the env var it needs, if it lacks it
            try:
                check = litellm.validate_environment(model=spec.model)
            except Exception:  # unknown provider: let the call itself say what is wrong
                check = {}
            missing = check.get("missing_keys") or []
            if missing and not check.get("keys_in_environment"):
                raise TransportError("missing_key", f"missing API key: set {', '.join(missing)}")
        kwargs: dict[str, Any] = {**spec.extra, **copy.deepcopy(params), "model": spec.model, "timeout": spec.timeout}
        if spec.api_base:
            kwargs["api_base"] = spec.api_base
            kwargs["api_key"] = spec.api_key or NO_KEY_PLACEHOLDER   # local servers ignore it
        elif spec.api_key:
            kwargs["api_key"] = spec.api_key
        try:
            # No stdout redirection here: it is process-wide and calls run concurrently.
            # suppress_debug_info (set on import) keeps litellm's error banners off stdout.
            return await getattr(litellm, method)(**kwargs, **request)
        except Exception as exc:
            if method == "acompletion" and spec.model.startswith("ollama") and OLLAMA_SHAPE in str(exc):
                base = (spec.api_base or OLLAMA_DEFAULT_BASE).rstrip("/")
                raise TransportError("client", f"the server at {base} did not answer in Ollama's protocol (/api/chat): "
                                               f"if it is an OpenAI-compatible server, give its /v1 URL (e.g. "
                                               f"{base}/v1) or set models.{spec.name}.transport=http") from None
            raise classify(exc) from None

    async def aclose(self) -> None:
        if self._litellm is None:
            return
        with contextlib.suppress(Exception):
            await self._litellm.close_litellm_async_clients()


def _dumped(response: Any) -> dict[str, Any]:
    """A litellm response as the JSON an OpenAI-compatible server sends ({} for anything else)."""
    return response.model_dump(warnings=False) if hasattr(response, "model_dump") else {}


def _cost(response: Any) -> float:
    """litellm's own cost figure of a response (0.0 when it has none)."""
    return float((getattr(response, "_hidden_params", {}) or {}).get("response_cost") or 0.0)
