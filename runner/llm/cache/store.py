"""A disk cache of JSON values (diskcache, eviction off), shared by LLM answers and search results.

A cache that cannot be opened at all is one message before the run (CacheUnusable, exit 2).
A cache.db damaged inside (sqlite's "database disk image is malformed") is read as far as it
can be: an entry that cannot be read is a miss, asked again, and one that cannot be written is
not kept, with one warning naming the file and the fix. A run still judges every item and keeps
the rest of a large cache, rather than making the user throw every answer away first.

`runner cache stats` and `runner cache clear` (`cache_stats`, `clear_cache`) read the LLM answer
cache under <cache>/responses (and remove <cache>/call_logs, the logs older versions kept beside
their answers); their statistics and filters read the values the LLM service stores (content,
usage, model, timestamp)."""

from __future__ import annotations

import re
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from runner.errors import InputError, RunnerError
from runner.fileio import parse_json
from runner.pipeline.model import Pipeline, StepSpec
from runner.safetext import dumps

MAX_ENTRY_CHARS = 256 * 2**20        # an entry past this was not written by runner: asked again
RESPONSES = "responses"
LEGACY_LOGS = "call_logs"     # call logs older versions kept beside their answers: `cache clear` removes them
DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


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
            fix = (f"run `runner cache clear --cache-dir {self.directory.parent}`" if self.directory.name == RESPONSES
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
    wanted = ([RESPONSES] if pipeline.models else []) + (["search"] if uses(pipeline.steps, "search") else [])
    opened: dict[str, JsonCache] = {}
    try:
        for name in wanted:
            opened[name] = JsonCache(directory / name)
    except CacheUnusable:
        for cache in opened.values():
            cache.close()
        raise
    return opened


def corrupt(directory: Path, exc: Exception) -> CacheUnusable:
    return CacheUnusable(f"cache folder {directory} cannot be used ({exc}): remove it to start an empty cache "
                         "(answers will be asked again)")


@contextmanager
def open_cache(directory: Path) -> Iterator[Any]:
    import diskcache
    if not (directory / "cache.db").is_file():
        raise RunnerError(f"{directory}: no LLM cache here (give --cache-dir or set RUNNER_CACHE_DIR)")
    try:
        cache = diskcache.Cache(str(directory), eviction_policy="none", size_limit=2**62)
    except (sqlite3.DatabaseError, OSError) as exc:
        raise corrupt(directory, exc) from None
    try:
        yield cache
    except sqlite3.DatabaseError as exc:
        raise corrupt(directory, exc) from None
    finally:
        cache.close()


def parse_age(text: str) -> timedelta:
    match = DURATION.match(text)
    if not match:
        raise RunnerError(f"--older-than '{text}': give a number and a unit, such as 30d, 12h, 2w (s, m, h, d, w)")
    try:
        return timedelta(**{UNITS[match.group(2)]: int(match.group(1))})
    except OverflowError:
        raise RunnerError(f"--older-than '{text}': longer than a date can reach (at most 999999999 days)") from None


def _entries(cache: Any) -> Iterator[tuple[Any, dict[str, Any]]]:
    for key in cache.iterkeys():
        raw = cache.get(key)
        try:
            value = parse_json(raw, str(key)) if isinstance(raw, str) else {}
        except InputError:
            value = {}
        yield key, value if isinstance(value, dict) else {}


def _when(value: dict[str, Any]) -> datetime | None:
    try:
        stamp = datetime.fromisoformat(str(value.get("timestamp")))
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def model_matches(stored: str, wanted: str) -> bool:
    """`openai/gpt-4o-mini` is matched by itself and by `gpt-4o-mini`."""
    return stored == wanted or stored.split("/", 1)[-1] == wanted.split("/", 1)[-1]


@dataclass
class ModelRow:
    entries: int = 0
    oldest: str | None = None
    newest: str | None = None


@dataclass
class CacheStats:
    directory: str
    entries: int = 0
    size_bytes: int = 0
    oldest: str | None = None
    newest: str | None = None
    models: dict[str, ModelRow] = field(default_factory=dict)


def _span(row: ModelRow | CacheStats, stamp: str | None) -> None:
    if stamp:
        row.oldest = min(row.oldest or stamp, stamp)
        row.newest = max(row.newest or stamp, stamp)


def cache_stats(cache_dir: Path) -> CacheStats:
    directory = cache_dir / RESPONSES
    stats = CacheStats(str(directory))
    with open_cache(directory) as cache:
        stats.size_bytes = int(cache.volume())
        for _, value in _entries(cache):
            when = _when(value)
            stamp = when.isoformat(timespec="seconds") if when else None
            row = stats.models.setdefault(str(value.get("model") or "(unknown)"), ModelRow())
            row.entries += 1
            stats.entries += 1
            _span(row, stamp)
            _span(stats, stamp)
    return stats


def clear_cache(cache_dir: Path, model: str | None = None, older_than: timedelta | None = None) -> int | None:
    """Delete the matching entries (all with no filter): how many, or None when, with no filter,
    the cache was damaged (its entries cannot be counted) and its folder was removed whole."""
    directory = cache_dir / RESPONSES
    cutoff = datetime.now(UTC) - older_than if older_than is not None else None
    logs = cache_dir / LEGACY_LOGS
    if model is None and cutoff is None:
        shutil.rmtree(logs, ignore_errors=True)
        try:
            with open_cache(directory) as cache:
                return int(cache.clear())
        except CacheUnusable as unusable:      # damaged inside: the entries cannot be read to be deleted
            try:
                shutil.rmtree(directory)
            except OSError:
                raise unusable from None
            return None
    with open_cache(directory) as cache:
        doomed = [key for key, value in _entries(cache)
                  if (model is None or model_matches(str(value.get("model") or ""), model))
                  and (cutoff is None or ((when := _when(value)) is not None and when < cutoff))]
        for key in doomed:
            cache.delete(key)
            (logs / f"{key}.txt").unlink(missing_ok=True)
        return len(doomed)
