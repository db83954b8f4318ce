"""Search providers for the `search` step, registered by name like step types, with
results cached on disk like LLM answers."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from runner.registry import Registry


@dataclass
class SearchRequest:
    query: str
    max_results: int = 3
    options: dict[str, Any] = field(default_factory=dict)   # provider settings (api_base, api_key, folder, ...)


class SearchFailed(Exception):
    """The provider could not answer; the step turns this into empty results and an error."""


@dataclass
class Provider:
    """A search provider; each module of runner/search adds its own to PROVIDERS."""

    name: str
    search: Callable[[SearchRequest], Awaitable[list[dict[str, Any]]]]
    cache_salt: Callable[[SearchRequest], Any] = lambda request: None   # e.g. the folder's file hashes
    secret_options: tuple[str, ...] = ()                                # never part of a cache key
    network: bool = False          # asks a service over the network: never from `render` or a sweep's probe


# Every module of runner/search is imported on the first lookup and adds its provider.
PROVIDERS: Registry[Provider] = Registry("search provider", "runner.search")


def cache_key(found: Provider, request: SearchRequest) -> str:
    options = {k: v for k, v in request.options.items() if k not in found.secret_options}
    payload = {"format": 1, "provider": found.name, "query": request.query, "max_results": request.max_results,
               "options": options, "salt": found.cache_salt(request)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
