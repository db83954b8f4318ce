"""`runner cache stats` and `runner cache clear`: the LLM answer cache under <cache>/responses
(and <cache>/call_logs, the logs older versions kept beside their answers). The statistics and
filters read the values the LLM service stores (content, usage, model, timestamp)."""

from __future__ import annotations

import re
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from runner.errors import InputError, RunnerError
from runner.fileio import parse_json
from runner.llm.cache.store import CacheUnusable

RESPONSES = "responses"
LEGACY_LOGS = "call_logs"     # call logs older versions kept beside their answers: `cache clear` removes them
DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


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
