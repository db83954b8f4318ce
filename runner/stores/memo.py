"""Results kept by a content key across runs (`memo:` in a pipeline).

An item whose key is in the store reuses its result with no step run; failed items are never
stored. An SQLite database (WAL, a busy timeout), one upsert per finished item: a killed run
keeps what it stored, runs sharing a store keep both's entries. A store configured as
`name.json` lives in `name.sqlite`; an existing `name.json` ({key: result}) is imported once,
when its database is first opened, and left as it was."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from runner.errors import RunnerError
from runner.fileio import dumps, read_json
from runner.stores.database import open_shared, transaction
from runner.stores.kept import ANSWERED_FIELD, answered_before, without_reads

DEFAULT_STORE = "memo.json"
BUSY_TIMEOUT_MS = 60_000          # how long a write waits for another run's transaction
SCHEMA = """
CREATE TABLE IF NOT EXISTS memo (key TEXT PRIMARY KEY, result TEXT NOT NULL, stored_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS imported (source TEXT PRIMARY KEY, entries INTEGER NOT NULL, imported_at REAL NOT NULL);
"""


def database_path(store: Path) -> Path:
    """The database of a configured store: `verification_map.json` -> `verification_map.sqlite`."""
    if store.suffix in (".sqlite", ".db"):
        return store
    return store.with_suffix(".sqlite") if store.suffix == ".json" else store.with_name(store.name + ".sqlite")


class MemoStore:
    def __init__(self, path: Path, read_only: bool = False):
        """`read_only`: read what runs stored, store nothing (`runner render`: a run's preview)."""
        self.path = database_path(path)
        self.read_only = read_only
        self.hits = 0
        self.stored = 0
        self.unreadable = 0               # stored results read that were not JSON objects (each a miss)
        try:
            if read_only:
                self._db = _read_only(self.path)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # Opened where the run starts (serve: a worker thread), then used by the run's event loop
                # alone: one thread at a time, which SQLite allows across threads.
                self._db = open_shared(self.path, SCHEMA, BUSY_TIMEOUT_MS, check_same_thread=False)
                self._db.execute("PRAGMA synchronous = NORMAL")    # WAL: a commit survives a killed process
        except sqlite3.DatabaseError as exc:
            raise RunnerError(f"{self.path}: not a usable memo store ({exc})") from None
        if path.suffix == ".json" and path.is_file() and not read_only:
            self._import_once(path)

    @classmethod
    def reading(cls, path: Path) -> MemoStore | None:
        """The store at `path` to read only, None when no run made it (nothing is created)."""
        return cls(path, read_only=True) if database_path(path).is_file() else None

    def _import_once(self, source: Path) -> None:
        name = source.name
        if self._db.execute("SELECT 1 FROM imported WHERE source = ?", (name,)).fetchone():
            return
        entries = read_json(source) if source.stat().st_size else {}     # size, depth and UTF-8 checked, located
        if not isinstance(entries, dict):
            raise RunnerError(f"{source}: memo store must be a JSON object of key -> result")
        with transaction(self._db) as db:       # two runs opening the store at once import it once
            if not db.execute("SELECT 1 FROM imported WHERE source = ?", (name,)).fetchone():
                now = time.time()
                db.executemany(
                    "INSERT OR IGNORE INTO memo (key, result, stored_at) VALUES (?, ?, ?)",
                    ((str(key), dumps(value), now) for key, value in entries.items() if isinstance(value, dict)))
                db.execute("INSERT INTO imported (source, entries, imported_at) VALUES (?, ?, ?)",
                           (name, len(entries), now))

    def get(self, key: str, usable: Callable[[dict[str, Any]], dict[str, Any] | None]) -> dict[str, Any] | None:
        """The stored result as `usable` takes it (a hit, noted kept.ANSWERED_FIELD when a model's
        answer made it); None when none is usable, or its row is no JSON object (`unreadable`)."""
        row = self._db.execute("SELECT result FROM memo WHERE key = ?", (key,)).fetchone()
        stored = None if row is None else self._readable(row[0])
        entry = None if stored is None else usable(stored)
        self.hits += entry is not None
        if entry is not None and stored is not None and answered_before(stored):
            entry[ANSWERED_FIELD] = True          # the run counts it (outputs/summary.ErrorCount.add)
        return entry

    def _readable(self, text: object) -> dict[str, Any] | None:
        try:
            value = json.loads(text) if isinstance(text, (str, bytes)) else None
        except (ValueError, RecursionError):
            value = None
        if not isinstance(value, dict):
            self.unreadable += 1
            return None
        return value

    def put(self, key: str, result: dict[str, Any]) -> None:
        if self.read_only:
            return
        kept = {k: v for k, v in result.items() if k not in ("index", "item_key", "warnings")}
        self._db.execute("INSERT INTO memo (key, result, stored_at) VALUES (?, ?, ?) "
                         "ON CONFLICT (key) DO UPDATE SET result = excluded.result, stored_at = excluded.stored_at",
                         (key, dumps(kept), time.time()))
        self.stored += 1

    def items(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every readable stored (key, result), read one at a time (without the notes of what made it)."""
        for key, text in self._db.execute("SELECT key, result FROM memo ORDER BY rowid"):
            value = self._readable(text)
            if value is not None:
                yield key, without_reads(value)

    def close(self) -> None:
        """Every entry is already stored as its item finished: this only closes the database."""
        self._db.close()


def _read_only(path: Path) -> sqlite3.Connection:
    """An existing store opened to read alone (query_only; no schema, no journal mode): mode=rw,
    so closing it removes SQLite's -wal and -shm files, unless its permissions make it mode=ro."""
    mode = "rw" if os.access(path, os.W_OK) else "ro"
    db = sqlite3.connect(f"file:{quote(str(path))}?mode={mode}", uri=True, timeout=BUSY_TIMEOUT_MS / 1000,
                         isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA query_only = ON")
    return db


def store_path(out_dir: Path, store: str | None) -> Path:
    path = Path(store or DEFAULT_STORE)
    return path if path.is_absolute() else out_dir / path
