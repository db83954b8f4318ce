"""A disk cache of JSON values (diskcache, eviction off), shared by LLM answers and
search results."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from .cache_admin import corrupt


class JsonCache:
    def __init__(self, directory: Path):
        import diskcache  # imported on first use: validate and render never open a cache
        self.directory = directory
        try:
            self._cache = diskcache.Cache(str(directory), eviction_policy="none", size_limit=2**62)
        except sqlite3.DatabaseError as exc:
            raise corrupt(directory, exc) from None

    def get(self, key: str) -> Any:
        try:
            raw = self._cache.get(key)
        except sqlite3.DatabaseError as exc:
            raise corrupt(self.directory, exc) from None
        return json.loads(raw) if isinstance(raw, str) else None

    def set(self, key: str, value: Any) -> None:
        self._cache.set(key, json.dumps(value, ensure_ascii=False))

    def close(self) -> None:
        self._cache.close()
