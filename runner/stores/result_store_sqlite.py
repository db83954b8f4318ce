"""The result store in an SQLite file (WAL): one connection shared by the server's threads,
one statement at a time; each write its own transaction, so a killed server keeps every
result it stored."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

from runner.stores.result_store import SCHEMA, ResultStore, StoreUnavailable
from runner.stores.shared_sqlite import open_shared


class SqliteResultStore(ResultStore):
    placeholder = "?"

    def __init__(self, path: Path):
        self.path = path
        self.url = str(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = open_shared(path, SCHEMA + ";", check_same_thread=False)
            self._db.execute("PRAGMA synchronous = NORMAL")     # WAL: a commit survives a killed process
        except (OSError, sqlite3.Error) as exc:
            raise StoreUnavailable(f"{path}: not a usable result store ({exc})") from None
        self._lock = threading.Lock()

    def _rows(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        try:
            with self._lock:
                return self._db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"result store {self.path}: {exc}") from None

    def _write(self, sql: str, params: list[Any]) -> None:
        try:
            with self._lock:
                self._db.execute(sql, params)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"result store {self.path}: {exc}") from None

    def close(self) -> None:
        with self._lock:
            self._db.close()
