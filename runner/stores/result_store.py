"""Judged results kept by what they judged (`runner serve`): one row per pipeline name, hash of
the pipeline's resolved content (params included) and item key, so a changed pipeline, or a
request with other params, judges again while an unchanged one answers from here. The same
SQL on SQLite (a file beside the pipelines, by default) or PostgreSQL (a team's server); one
that cannot be reached raises StoreUnavailable, which the server answers with 503."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runner.fileio import dumps
from runner.stores.database import Database, PostgresDatabase, SqliteDatabase, StoreUnavailable, chunks

TABLE = "runner_results"
SCHEMA = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    pipeline      TEXT NOT NULL,
    pipeline_hash TEXT NOT NULL,
    item_key      TEXT NOT NULL,
    result        TEXT NOT NULL,    -- the result as JSON, exactly as judged
    stored_at     TEXT NOT NULL,    -- ISO 8601, UTC
    PRIMARY KEY (pipeline, pipeline_hash, item_key)
);"""
COLUMNS = "pipeline, pipeline_hash, item_key, result, stored_at"


@dataclass(frozen=True)
class StoredResult:
    pipeline: str
    pipeline_hash: str
    item_key: str
    result: dict[str, Any]
    stored_at: str


class ResultStore:
    def __init__(self, db: Database):
        self.db = db

    @classmethod
    def sqlite(cls, path: Path) -> ResultStore:
        """The store in an SQLite file (made when missing); StoreUnavailable when it is no database."""
        try:
            return cls(SqliteDatabase(path, SCHEMA, "result store"))
        except (OSError, sqlite3.Error) as exc:
            raise StoreUnavailable(f"{path}: not a usable result store ({exc})") from None

    @classmethod
    def postgres(cls, dsn: str) -> ResultStore:
        """The store in PostgreSQL: made even when the server cannot be reached (each query says so)."""
        return cls(PostgresDatabase(dsn, SCHEMA, "result store"))

    def get(self, pipeline: str, pipeline_hash: str, item_key: str) -> StoredResult | None:
        return self.get_many(pipeline, pipeline_hash, [item_key]).get(item_key)

    def get_many(self, pipeline: str, pipeline_hash: str, keys: Iterable[str]) -> dict[str, StoredResult]:
        """The stored results of these keys (those that have one)."""
        found: dict[str, StoredResult] = {}
        for chunk, marks in chunks(keys):
            for row in self.db.rows(f"SELECT {COLUMNS} FROM {TABLE} WHERE pipeline = ? AND pipeline_hash = ? "
                                    f"AND item_key IN ({marks})", [pipeline, pipeline_hash, *chunk]):
                stored = _stored(row)
                found[stored.item_key] = stored
        return found

    def put(self, pipeline: str, pipeline_hash: str, item_key: str, result: dict[str, Any]) -> StoredResult:
        """Store (or replace) one result, committed before this returns."""
        return self.put_many(pipeline, pipeline_hash, [(item_key, result)])[0]

    def put_many(self, pipeline: str, pipeline_hash: str,
                 entries: list[tuple[str, dict[str, Any]]]) -> list[StoredResult]:
        """Store (or replace) these results by item key, in one transaction committed before this returns."""
        at = datetime.now(UTC).isoformat(timespec="milliseconds")
        stored = [StoredResult(pipeline, pipeline_hash, key, result, at) for key, result in entries]
        self.db.write_many(f"INSERT INTO {TABLE} ({COLUMNS}) VALUES (?, ?, ?, ?, ?) ON CONFLICT (pipeline, "
                           "pipeline_hash, item_key) DO UPDATE SET result = excluded.result, stored_at = "
                           "excluded.stored_at", [[pipeline, pipeline_hash, entry.item_key, dumps(entry.result), at]
                                                  for entry in stored])
        return stored

    def of_pipeline(self, pipeline: str, pipeline_hash: str) -> Iterator[StoredResult]:
        """Every result stored under this pipeline hash, oldest first."""
        for row in self.db.rows(f"SELECT {COLUMNS} FROM {TABLE} WHERE pipeline = ? AND pipeline_hash = ? "
                                "ORDER BY stored_at, item_key", [pipeline, pipeline_hash]):
            yield _stored(row)

    def count(self, pipeline: str) -> int:
        """Results stored for this pipeline, under every hash it has had."""
        return int(self.db.rows(f"SELECT count(*) FROM {TABLE} WHERE pipeline = ?", [pipeline])[0][0])

    def ping(self) -> None:
        """StoreUnavailable unless the database answers now."""
        self.db.rows("SELECT 1", [])

    def close(self) -> None:
        self.db.close()


def _stored(row: tuple[Any, ...]) -> StoredResult:
    pipeline, pipeline_hash, item_key, text, stored_at = row
    value = json.loads(text)
    return StoredResult(pipeline, pipeline_hash, item_key, value if isinstance(value, dict) else {}, str(stored_at))
