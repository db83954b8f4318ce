"""`search`: results from a search provider, cached on disk; failures are data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runner.checks.result_shapes import closed
from runner.engine.context import Runtime, StepContext
from runner.engine.steps.base import Step, register
from runner.errors import NeedsModel
from runner.llm.cache.store import JsonCache
from runner.redact import remember_url
from runner.search import PROVIDERS, SearchFailed, SearchRequest, cache_key

OPTION_KEYS = ("api_key", "api_base", "search_depth", "folder", "timeout", "retries", "backoff")   # the provider's


@dataclass(frozen=True)
class SearchArgs:
    query: Any
    provider: Any
    max_results: Any = None


@register
class Search(Step):
    name = "search"
    summary = "Search (tavily or a local folder) -> results [{title, url|path, content, score}] and error."
    result = closed({"results": {"type": "array"}, "error": {"type": ["string", "null"]},
                     "cached": {"type": "boolean"}})

    async def run(self, ctx: StepContext) -> Any:
        args = ctx.arguments(SearchArgs)
        found = PROVIDERS.get(str(args.provider))
        options = {k: ctx.args[k] for k in OPTION_KEYS if ctx.args.get(k) is not None}
        remember_url(options.get("api_base") or "")
        request = SearchRequest(str(args.query), int(args.max_results or 3), options)
        key = cache_key(found, request)
        cache = ctx.runtime.resource(_cache)
        cached = None if ctx.runtime.options.no_cache else cache.get(key)
        if cached is not None:
            return {"results": cached, "error": None, "cached": True}
        if found.network and ctx.runtime.role.preview is not None:
            raise NeedsModel(f"search {found.name} {request.query[:80]!r} (render and a sweep's cached pass "
                             "send no request)")
        try:
            results = await found.search(request)
        except SearchFailed as exc:
            return {"results": [], "error": str(exc), "cached": False}
        cache.set(key, results)
        return {"results": results, "error": None, "cached": False}


def _cache(runtime: Runtime) -> JsonCache:
    cache = runtime.open_caches.pop("search", None) or JsonCache(runtime.options.cache_dir / "search")
    runtime.closers.append(cache.close)
    return cache
