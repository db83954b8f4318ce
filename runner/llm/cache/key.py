"""The response cache's key (which request an answer belongs to) and its entries (what is
kept of the answer, and a kept entry as the service reads it back).

The key is sha256 of one canonical JSON of everything that changes the answer
(`request_key` says each field). The endpoint is the model's `cache_as` name when it has
one, else its api_base in one spelling (`endpoint_identity`): `http://127.0.0.1:1234/v1/`
and `http://LOCALHOST:1234/v1` are one server. The common spelling is its own identity, so
keys made before it was normalised stay valid."""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from runner.fileio import now
from runner.llm.client.spec import SAMPLING_KEYS, host_identity
from runner.llm.client.transport import Completion, usage_of
from runner.llm.logprobs import usable as token_pairs
from runner.safetext import clean_text, utf8

CACHE_FORMAT = 1
DEFAULT_PORTS = {"http": 80, "https": 443}


@lru_cache(maxsize=256)      # a run's models name a handful of servers, each asked for every call
def endpoint_identity(api_base: str | None) -> str | None:
    """The server an api_base names, however it is spelled: scheme and host lowercase, a
    loopback address as localhost, no default port, no credentials, no trailing slash."""
    if not api_base:
        return None
    try:
        parts = urlsplit(api_base.strip())
        port = parts.port
    except ValueError:
        return api_base
    if not parts.hostname:
        return api_base.rstrip("/")
    scheme = parts.scheme.lower()
    host = host_identity(parts.hostname)
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != DEFAULT_PORTS.get(scheme):
        netloc += f":{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, parts.fragment))


def canonical(value: Any) -> str:
    """Sorted keys, no spaces, non-ASCII kept: one text for equal values, whatever their order."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def request_key(*, model: str, api_base: str | None, messages: list[dict[str, Any]],
                sampling: dict[str, Any], response_format: str | None = None, output_schema: Any = None,
                sample: int = 0, extra: dict[str, Any] | None = None, cache_as: str | None = None,
                logprobs: bool = False, embeddings: bool = False) -> str:
    """The cache key of one request: sha256 of the canonical JSON of what changes its answer.

    - `format`: CACHE_FORMAT, raised when what an entry means changes;
    - `model`: the exact model string sent (`openai/gpt-4o-mini` and `gpt-4o-mini` differ);
    - `api_base`: the server in one spelling (endpoint_identity), or None and a `cache_as` field;
    - `messages` as sent; `sampling`: each of SAMPLING_KEYS, None when unset;
    - `response_format`: the structured-output mode sent (`json_schema`, `json_object` or None),
      and `output_schema`: the schema the answer was checked against;
    - `sample`: which of a step's repeated samples; `extra`: the model's `params:`;
    - `logprobs`, `embeddings`: true when token probabilities, or the vectors of the messages'
      contents, were asked for (absent otherwise, so the other keys stay what they were).

    Never the API key, timeouts, retries or limits: they do not change an answer."""
    payload: dict[str, Any] = {
        "format": CACHE_FORMAT, "model": model,
        "api_base": endpoint_identity(api_base) if cache_as is None else None,
        "messages": messages, "sampling": {name: sampling.get(name) for name in SAMPLING_KEYS},
        "response_format": response_format, "output_schema": output_schema, "sample": sample,
        "extra": extra or {}}
    if cache_as is not None:
        payload["cache_as"] = cache_as
    if logprobs:
        payload["logprobs"] = True
    if embeddings:
        payload["embeddings"] = True
    return hashlib.sha256(utf8(canonical(payload))).hexdigest()


def new_entry(text: str, completion: Completion, logprobs: bool = False, made_by: str | None = None) -> dict[str, Any]:
    """What the cache keeps of an answer: its text, finish reason, usage, cost, the model that
    answered and when (`runner cache stats` and `clear` read these); the token probabilities when
    asked for (null: none sent); an embeddings request's vectors."""
    entry: dict[str, Any] = {"content": text, "finish_reason": completion.finish_reason, "usage": completion.usage,
                             "cost": completion.cost, "model": completion.model,
                             "timestamp": now()}
    if logprobs:
        entry["logprobs"] = completion.logprobs
    if completion.vectors is not None:
        entry["vectors"] = completion.vectors
    if made_by:
        entry["made_by"] = made_by       # the model and endpoint: a `cache_as` answer says where it came from
    return entry


def cached_completion(entry: dict[str, Any], model: str) -> Completion:
    """A usable entry (see `usable`) as the answer it keeps: what new_entry took from it."""
    return Completion(entry["content"], entry.get("finish_reason"), entry.get("usage", {}), 0.0,
                      entry.get("model", model), logprobs=entry.get("logprobs"), vectors=entry.get("vectors"))


def usable(cached: Any, embeddings: bool = False) -> dict[str, Any] | None:
    """A cached answer as the service reads it, or None (asked again) when the entry is not one (for
    `embeddings`, one without vectors): whatever a cache file holds, a rerun never fails on it."""
    if not isinstance(cached, dict) or not isinstance(cached.get("content"), str):
        return None
    if embeddings and _vectors(cached.get("vectors")) is None:
        return None
    finish = cached.get("finish_reason")
    model = cached.get("model")
    return {**cached, "content": clean_text(cached["content"]), "usage": usage_of(cached.get("usage")),
            "finish_reason": clean_text(finish) if isinstance(finish, str) else None,
            "logprobs": token_pairs(cached.get("logprobs")), "vectors": _vectors(cached.get("vectors")),
            **({"model": clean_text(model)} if isinstance(model, str) else {})}


def _vectors(value: Any) -> list[list[float]] | None:
    """Stored embeddings as lists of numbers, or None."""
    if not isinstance(value, list) or not all(isinstance(v, list) and v for v in value):
        return None
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for v in value for x in v):
        return None
    return [[float(x) for x in v] for v in value]
