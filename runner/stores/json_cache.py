"""A disk cache of JSON values (diskcache, eviction off), shared by LLM answers and
search results."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from runner.errors import InputError, RunnerError
from runner.fileio import parse_json
from runner.pipeline.model import Pipeline, StepSpec
from runner.safetext import dumps
from runner.stores.key_filter import KeyFilter

MAX_ENTRY_CHARS = 256 * 2**20        # an entry past this was not written by runner: asked again


class CacheUnusable(RunnerError):
    """The cache folder cannot be opened: not a folder, not writable, or not a cache."""


class JsonCache:
    def __init__(self, directory: Path, only_writer: bool = False):
        """`only_writer`: no other process writes this cache while it is open (a local run).
        Then, if it was empty when opened, a key never stored through this object is not looked
        up: it cannot be there. A cold run's every call looked up an answer that could not be
        there, at 20-36 us each (issue 26, bench/RESULTS.md)."""
        import diskcache  # imported on first use: validate and render never open a cache
        self.directory = directory
        try:
            # cull_limit 0: nothing expires or is evicted, so each write skips diskcache's query for what to cull.
            self._cache = diskcache.Cache(str(directory), eviction_policy="none", size_limit=2**62, cull_limit=0)
        except (OSError, sqlite3.Error) as exc:
            raise CacheUnusable(f"cache folder {directory} cannot be used ({exc}): give another --cache-dir, "
                                "or remove it to start an empty cache") from None
        self._stored: KeyFilter | None = None
        self._rows_writable = False
        if only_writer and len(self._cache) == 0:
            from runner.stores.disk_rows import writable
            self._stored = KeyFilter()
            self._rows_writable = writable(self._cache)     # a new key's row, written straight (disk_rows.py)

    def get(self, key: str) -> Any:
        """The value, or None when there is none or the entry cannot be read (it is asked again)."""
        if self._stored is not None and key not in self._stored:
            return None
        raw = self._cache.get(key)
        if not isinstance(raw, str) or len(raw) > MAX_ENTRY_CHARS:
            return None
        try:
            return parse_json(raw, key)
        except InputError:
            return None

    def set(self, key: str, value: Any) -> None:
        if self._stored is not None:
            self._stored.add(key)
        self._cache.set(key, dumps(value))

    def set_many(self, pairs: list[tuple[str, Any]]) -> None:
        """Several values in one transaction (one commit instead of one each)."""
        texts = [(key, dumps(value)) for key, value in pairs]
        with self._cache.transact():
            for key, text in self._insert_new(texts):
                self._cache.set(key, text)

    def _insert_new(self, texts: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Write the rows of keys this cache cannot hold yet (disk_rows.py), in the caller's
        transaction; the rest, in order, are for Cache.set (a key given twice: the second
        replaces the first)."""
        if self._stored is None:
            return texts
        stored = self._stored
        new: list[tuple[str, str]] = []
        rest: list[tuple[str, str]] = []
        for key, text in texts:
            (new if self._rows_writable and key not in stored else rest).append((key, text))
            stored.add(key)
        if not new:
            return rest
        from runner.stores.disk_rows import insert_new
        return insert_new(self._cache, new) + rest

    def close(self) -> None:
        self._cache.close()


def open_caches(pipeline: Pipeline, directory: Path, only_writer: bool = False) -> dict[str, JsonCache]:
    """Every cache the pipeline's run will use, opened (by folder name), or CacheUnusable:
    an unusable cache is one message before the run, and the run then uses these.
    `only_writer`: this process alone writes them while the run lasts (JsonCache)."""
    def uses(steps: tuple[StepSpec, ...], kind: str) -> bool:
        return any(step.uses == kind or uses(step.substeps, kind) for step in steps)
    wanted = (["responses"] if pipeline.models else []) + (["search"] if uses(pipeline.steps, "search") else [])
    opened: dict[str, JsonCache] = {}
    try:
        for name in wanted:
            opened[name] = JsonCache(directory / name, only_writer)
    except CacheUnusable:
        for cache in opened.values():
            cache.close()
        raise
    return opened
