"""The on-disk response cache (diskcache, eviction off).

Key: sha256 of canonical JSON of everything that changes the answer (format version,
exact model string, api_base, messages as sent, sampling parameters after defaults,
response format, output schema, sample index). Never keys, timeouts or retry settings."""

from __future__ import annotations

import hashlib
import json
from typing import Any

CACHE_FORMAT = 1


def request_key(*, model: str, api_base: str | None, messages: list[dict[str, Any]],
                sampling: dict[str, Any], response_format: Any = None, output_schema: Any = None,
                sample: int = 0, extra: dict[str, Any] | None = None) -> str:
    payload = {"format": CACHE_FORMAT, "model": model, "api_base": api_base, "messages": messages,
               "sampling": {k: sampling.get(k) for k in ("temperature", "top_p", "max_tokens", "seed", "stop")},
               "response_format": response_format, "output_schema": output_schema, "sample": sample,
               "extra": extra or {}}
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
