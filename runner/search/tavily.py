"""The Tavily search API over httpx: timeout, retries and Retry-After like LLM calls."""

from __future__ import annotations

from typing import Any

from runner.retry import Retryable, parse_retry_after, with_retries
from runner.search import PROVIDERS, Provider, SearchFailed, SearchRequest

DEFAULT_API_BASE = "https://api.tavily.com"
RETRY_STATUS = {429, 500, 502, 503, 504}


async def tavily_search(request: SearchRequest) -> list[dict[str, Any]]:
    import httpx  # installed with litellm; imported only when a search runs

    options = request.options
    api_key = options.get("api_key")
    if not api_key:
        raise SearchFailed("missing API key: set TAVILY_API_KEY")
    url = str(options.get("api_base") or DEFAULT_API_BASE).rstrip("/") + "/search"
    body = {"query": request.query, "max_results": request.max_results,
            "search_depth": options.get("search_depth", "basic")}
    headers = {"Authorization": f"Bearer {api_key}"}
    retries = int(options.get("retries", 3))
    backoff = float(options.get("backoff", 1.0))
    timeout = float(options.get("timeout", 30.0))
    async with httpx.AsyncClient(timeout=timeout) as client:

        async def send() -> list[dict[str, Any]]:
            try:
                response = await client.post(url, json=body, headers=headers)
            except httpx.TimeoutException:
                raise Retryable(f"tavily: timed out after {timeout:g} s") from None
            except httpx.TransportError as exc:
                raise Retryable(f"tavily: connection failed: {type(exc).__name__}") from None
            if response.status_code == 200:
                return _results(response.json())
            problem = f"tavily: HTTP {response.status_code}"
            if response.status_code not in RETRY_STATUS:
                raise SearchFailed(problem)
            raise Retryable(problem, parse_retry_after(response.headers.get("retry-after")))

        try:
            return await with_retries(send, retries, backoff)
        except Retryable as failure:
            raise SearchFailed(failure.message) from None


def _results(payload: Any) -> list[dict[str, Any]]:
    rows = payload.get("results", []) if isinstance(payload, dict) else []
    return [{"title": str(row.get("title", "")), "url": str(row.get("url", "")),
             "content": str(row.get("content", "")), "score": float(row.get("score") or 0.0)}
            for row in rows if isinstance(row, dict)]


PROVIDERS.add("tavily", Provider("tavily", tavily_search, secret_options=("api_key",), network=True))
