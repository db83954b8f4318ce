"""The on-disk response cache (diskcache, eviction off).

Key: sha256 of canonical JSON of everything that changes the answer (format version,
exact model string, the endpoint, messages as sent, sampling parameters after defaults,
response format, output schema, sample index). Never keys, timeouts or retry settings.

The endpoint is the model's `cache_as` name when it has one, else its api_base in one
spelling (`endpoint_identity`): `http://127.0.0.1:1234/v1/` and `http://LOCALHOST:1234/v1`
are one server. The common spelling is its own identity, so keys made before stay valid."""

from __future__ import annotations

import functools
import hashlib
import ipaddress
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from runner.llm.shared_json import CANONICAL, canonical
from runner.llm.usage import usage_of
from runner.safetext import clean_text, utf8

CACHE_FORMAT = 1


def usable(cached: Any) -> dict[str, Any] | None:
    """A cached answer as the service reads it, or None (asked again) when the entry is not
    one: whatever a cache file holds, a rerun never fails on it."""
    if not isinstance(cached, dict) or not isinstance(cached.get("content"), str):
        return None
    finish = cached.get("finish_reason")
    model = cached.get("model")
    return {**cached, "content": clean_text(cached["content"]), "usage": usage_of(cached.get("usage")),
            "finish_reason": clean_text(finish) if isinstance(finish, str) else None,
            **({"model": clean_text(model)} if isinstance(model, str) else {})}


# The top-level key holds the last such text: only response_format, sample and sampling
# (fixed keys) sort after it, while a string's own quotes are escaped.
SCHEMA_SLOT = '"output_schema":null'


LOOPBACK_NAME = "localhost"
DEFAULT_PORTS = {"http": 80, "https": 443}


def _host(name: str) -> str:
    """The host in one spelling: lowercase, any loopback address as `localhost`."""
    host = name.lower().rstrip(".")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return LOOPBACK_NAME if host == LOOPBACK_NAME else host
    return LOOPBACK_NAME if address.is_loopback else address.compressed


@functools.lru_cache(maxsize=1024)     # a pure function of the text, asked for every call's key
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
    host = _host(parts.hostname)
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != DEFAULT_PORTS.get(scheme):
        netloc += f":{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, parts.fragment))


def request_key(*, model: str, api_base: str | None, messages: list[dict[str, Any]],
                sampling: dict[str, Any], response_format: Any = None, output_schema: Any = None,
                sample: int = 0, extra: dict[str, Any] | None = None, cache_as: str | None = None) -> str:
    endpoint = endpoint_identity(api_base) if cache_as is None else None
    # The canonical JSON of the whole payload (sorted keys, no spaces): the keys that sort
    # before and after "messages" each in one encoding, the messages (the same for every seat
    # of a jury) and the schema (the same for every call of a step) spliced in, each encoded
    # once (shared_json.py). The same text as one canonical() of it all.
    head, tail = _around_messages(model, endpoint, sampling, response_format, sample, extra, cache_as)
    if output_schema is not None:
        before, after = tail.rsplit(SCHEMA_SLOT, 1)
        tail = f"{before}\"output_schema\":{CANONICAL(output_schema)}{after}"
    text = f"{head[:-1]},\"messages\":{CANONICAL(messages)},{tail[1:]}"
    return hashlib.sha256(utf8(text)).hexdigest()


SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "seed", "stop")
_PLAIN = frozenset({str, int, float, bool, type(None)})


def _around_messages(model: str, endpoint: str | None, sampling: dict[str, Any], response_format: Any,
                     sample: int, extra: dict[str, Any] | None, cache_as: str | None) -> tuple[str, str]:
    """The payload's text before and after its messages: the same for every call of a seat,
    so encoded once a seat (7 us a call) when every part is a plain value."""
    values = (model, endpoint, response_format, sample, cache_as, *[sampling.get(k) for k in SAMPLING_KEYS])
    types = tuple(map(type, values))
    if extra or not _PLAIN.issuperset(types):
        return _encode_around(values, extra)
    return _encode_plain(types, tuple(repr(v) for v in values if type(v) is float), values)


@functools.lru_cache(maxsize=1024)
def _encode_plain(types: tuple[type, ...], floats: tuple[str, ...], values: tuple[Any, ...]) -> tuple[str, str]:
    """_encode_around of plain values. Their types and each float's text are in the key: 1,
    1.0 and True are equal keys, and so are 0.0 and -0.0, but none is the JSON of another."""
    return _encode_around(values, None)


def _encode_around(values: tuple[Any, ...], extra: dict[str, Any] | None) -> tuple[str, str]:
    model, endpoint, response_format, sample, cache_as, *sampled = values
    payload = {"format": CACHE_FORMAT, "model": model, "api_base": endpoint,
               "sampling": dict(zip(SAMPLING_KEYS, sampled, strict=True)),
               "response_format": response_format, "output_schema": None, "sample": sample,
               "extra": extra or {}}
    if cache_as is not None:         # only then: keys without it stay as they were
        payload["cache_as"] = cache_as
    return (canonical({k: v for k, v in payload.items() if k < "messages"}),
            canonical({k: v for k, v in payload.items() if k > "messages"}))
