"""The memo store as an SQLite database: one row per content key, one upsert (its own
transaction) per finished item.

WAL journal and a busy timeout: a run killed with SIGKILL keeps every item it stored, two
runs sharing a store both keep their entries, and a run reads only the keys it asks for.
A JSON store of earlier versions ({key: result}, e.g. verification_map.json) is imported
once, the first time its database is opened; the JSON file is left as it was."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from runner.errors import RunnerError
from runner.fileio import dumps, read_json
from runner.stores.shared_sqlite import open_shared

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


class SqliteMemo:
    def __init__(self, path: Path, legacy_json: Path | None = None):
        self.path = path
        self.unreadable = 0               # rows read that hold no JSON object
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = open_shared(path, SCHEMA, BUSY_TIMEOUT_MS)
            self._db.execute("PRAGMA synchronous = NORMAL")    # WAL: a commit survives a killed process
        except sqlite3.DatabaseError as exc:
            raise RunnerError(f"{path}: not a usable memo store ({exc})") from None
        if legacy_json is not None and legacy_json.is_file():
            self._import_once(legacy_json)

    def _import_once(self, source: Path) -> None:
        name = source.name
        if self._db.execute("SELECT 1 FROM imported WHERE source = ?", (name,)).fetchone():
            return
        entries = _read_json_store(source)
        try:
            self._db.execute("BEGIN IMMEDIATE")       # two runs opening the store at once import it once
            if not self._db.execute("SELECT 1 FROM imported WHERE source = ?", (name,)).fetchone():
                now = time.time()
                self._db.executemany(
                    "INSERT OR IGNORE INTO memo (key, result, stored_at) VALUES (?, ?, ?)",
                    ((str(key), dumps(value), now) for key, value in entries.items() if isinstance(value, dict)))
                self._db.execute("INSERT INTO imported (source, entries, imported_at) VALUES (?, ?, ?)",
                                 (name, len(entries), now))
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored result, or None: none stored, or a row that is not a JSON object (counted
        in `unreadable`, as the LLM cache takes an unreadable entry for a miss)."""
        row = self._db.execute("SELECT result FROM memo WHERE key = ?", (key,)).fetchone()
        return None if row is None else self._readable(row[0])

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
        self._db.execute("INSERT INTO memo (key, result, stored_at) VALUES (?, ?, ?) "
                         "ON CONFLICT (key) DO UPDATE SET result = excluded.result, stored_at = excluded.stored_at",
                         (key, dumps(result), time.time()))

    def items(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every readable stored result (the others counted in `unreadable`)."""
        for key, text in self._db.execute("SELECT key, result FROM memo ORDER BY rowid"):
            value = self._readable(text)
            if value is not None:
                yield key, value

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM memo").fetchone()[0])

    def close(self) -> None:
        self._db.close()


def _read_json_store(path: Path) -> dict[str, Any]:
    loaded = read_json(path) if path.stat().st_size else {}     # size, depth and UTF-8 checked, located
    if not isinstance(loaded, dict):
        raise RunnerError(f"{path}: memo store must be a JSON object of key -> result")
    return loaded
