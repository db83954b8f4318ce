"""A disk cache of JSON values (diskcache, eviction off), shared by LLM answers and search results.

A cache that cannot be opened at all is one message before the run (CacheUnusable, exit 2).
A cache.db damaged inside (sqlite's "database disk image is malformed") is read as far as it
can be: an entry that cannot be read is a miss, asked again, and one that cannot be written is
not kept, with one warning naming the file and the fix. A run still judges every item and keeps
the rest of a large cache, rather than making the user throw every answer away first."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

from runner.errors import InputError, RunnerError
from runner.fileio import parse_json
from runner.pipeline.model import Pipeline, StepSpec
from runner.safetext import dumps

MAX_ENTRY_CHARS = 256 * 2**20        # an entry past this was not written by runner: asked again


class CacheUnusable(RunnerError):
    """The cache folder cannot be opened: not a folder, not writable, or not a cache."""


class JsonCache:
    def __init__(self, directory: Path):
        import diskcache  # imported on first use: validate and render never open a cache
        self.directory = directory
        try:
            # Nothing is ever evicted (eviction off, no size limit), so there is nothing to cull either.
            self._cache = diskcache.Cache(str(directory), eviction_policy="none", size_limit=2**62, cull_limit=0)
        except (OSError, sqlite3.Error) as exc:
            raise CacheUnusable(f"cache folder {directory} cannot be used ({exc}): give another --cache-dir, "
                                "or remove it to start an empty cache") from None
        self.damaged: str | None = None       # the warning, once the file was found damaged

    def get(self, key: str) -> Any:
        """The value, or None when there is none or the entry cannot be read (it is asked again)."""
        try:
            raw = self._cache.get(key)
        except sqlite3.DatabaseError as exc:
            self._damaged(exc)
            return None
        if not isinstance(raw, str) or len(raw) > MAX_ENTRY_CHARS:
            return None
        try:
            return parse_json(raw, key)
        except InputError:
            return None

    def set(self, key: str, value: Any) -> None:
        self.set_many([(key, value)])

    def set_many(self, pairs: list[tuple[str, Any]]) -> None:
        """Several values in one transaction (one commit); a key given twice keeps the later value."""
        texts = [(key, dumps(value)) for key, value in pairs]
        try:
            with self._cache.transact():
                for key, text in texts:
                    self._cache.set(key, text)
        except sqlite3.DatabaseError as exc:
            self._damaged(exc)

    def _damaged(self, exc: sqlite3.DatabaseError) -> None:
        if self.damaged is None:
            fix = (f"run `runner cache clear --cache-dir {self.directory.parent}`" if self.directory.name == "responses"
                   else f"delete {self.directory}")
            self.damaged = (f"runner: {self.directory / 'cache.db'} is damaged ({exc}): entries it cannot read are "
                            f"asked again and may not be kept; {fix} to start an empty cache")
            sys.stderr.write(self.damaged + "\n")

    def close(self) -> None:
        self._cache.close()


def open_caches(pipeline: Pipeline, directory: Path) -> dict[str, JsonCache]:
    """Every cache the pipeline's run will use, opened (by folder name), or CacheUnusable: one
    message before the run."""
    def uses(steps: tuple[StepSpec, ...], kind: str) -> bool:
        return any(step.uses == kind or uses(step.substeps, kind) for step in steps)
    wanted = (["responses"] if pipeline.models else []) + (["search"] if uses(pipeline.steps, "search") else [])
    opened: dict[str, JsonCache] = {}
    try:
        for name in wanted:
            opened[name] = JsonCache(directory / name)
    except CacheUnusable:
        for cache in opened.values():
            cache.close()
        raise
    return opened
