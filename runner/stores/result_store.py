"""Judged results kept by what they judged (`runner serve`): one row per pipeline name, hash of
the pipeline's resolved content (params included) and item key, so a changed pipeline, or a
request with other params, judges again while an unchanged one answers from here.

One interface, two databases: SQLite (WAL) in a file beside the pipelines by default
(result_store_sqlite.py), PostgreSQL for a team's shared server (result_store_postgres.py).
Both run the same SQL (placeholders aside) and pass the same tests. A database that cannot be
reached raises StoreUnavailable, which the server answers with 503, never a crash."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from runner.errors import RunnerError
from runner.fileio import dumps
from runner.redact import redact, remember, remember_url

TABLE = "runner_results"
SCHEMA = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    pipeline      TEXT NOT NULL,
    pipeline_hash TEXT NOT NULL,
    item_key      TEXT NOT NULL,
    result        TEXT NOT NULL,    -- the result as JSON, exactly as judged
    stored_at     TEXT NOT NULL,    -- ISO 8601, UTC
    PRIMARY KEY (pipeline, pipeline_hash, item_key)
)"""
CHUNK = 500          # keys per IN (...) query
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_LIBPQ_KEYWORDS = re.compile(r"\s*[A-Za-z_]+\s*=")    # libpq's keyword/value form: `host=db dbname=v ...`


def is_postgres(url: str) -> bool:
    """A PostgreSQL connection string: a postgresql:// URL or libpq's `keyword=value ...` form
    (never an SQLite file named after it: `./a=b.sqlite` names such a file)."""
    return url.startswith(POSTGRES_SCHEMES) or bool(_LIBPQ_KEYWORDS.match(url))


def shown_url(url: str) -> str:
    """The store's URL as a message may show it: a PostgreSQL password remembered as libpq reads
    it (a bare value runs to the next space, `#`, `;` and `,` included) and hidden everywhere."""
    if is_postgres(url):
        remember_url(url)
        with contextlib.suppress(Exception):          # a DSN libpq cannot read fails where it is opened
            from psycopg.conninfo import conninfo_to_dict
            remember(str(conninfo_to_dict(url).get("password") or ""))
    return redact(url)


class StoreUnavailable(RunnerError):
    """The database cannot be reached or used right now; the message says which and why."""


@dataclass(frozen=True)
class StoredResult:
    pipeline: str
    pipeline_hash: str
    item_key: str
    result: dict[str, Any]
    stored_at: str


class ResultStore:
    """The queries; a database module supplies `_rows` and `_write` (and `close`)."""

    placeholder = "?"
    url = ""              # where it is, for messages: never a password

    def get(self, pipeline: str, pipeline_hash: str, item_key: str) -> StoredResult | None:
        return self.get_many(pipeline, pipeline_hash, [item_key]).get(item_key)

    def get_many(self, pipeline: str, pipeline_hash: str, keys: Iterable[str]) -> dict[str, StoredResult]:
        """The stored results of these keys (those that have one)."""
        found: dict[str, StoredResult] = {}
        wanted = list(dict.fromkeys(keys))
        for start in range(0, len(wanted), CHUNK):
            chunk = wanted[start:start + CHUNK]
            marks = ", ".join([self.placeholder] * len(chunk))
            for row in self._rows(f"SELECT pipeline, pipeline_hash, item_key, result, stored_at FROM {TABLE} "
                                  f"WHERE pipeline = {self.placeholder} AND pipeline_hash = {self.placeholder} "
                                  f"AND item_key IN ({marks})", [pipeline, pipeline_hash, *chunk]):
                stored = _stored(row)
                found[stored.item_key] = stored
        return found

    def put(self, pipeline: str, pipeline_hash: str, item_key: str, result: dict[str, Any]) -> StoredResult:
        """Store (or replace) one result, committed before this returns."""
        stored = StoredResult(pipeline, pipeline_hash, item_key, result,
                              datetime.now(UTC).isoformat(timespec="milliseconds"))
        mark = self.placeholder
        self._write(f"INSERT INTO {TABLE} (pipeline, pipeline_hash, item_key, result, stored_at) "
                    f"VALUES ({mark}, {mark}, {mark}, {mark}, {mark}) ON CONFLICT (pipeline, pipeline_hash, item_key) "
                    "DO UPDATE SET result = excluded.result, stored_at = excluded.stored_at",
                    [pipeline, pipeline_hash, item_key, dumps(result), stored.stored_at])
        return stored

    def of_pipeline(self, pipeline: str, pipeline_hash: str) -> Iterator[StoredResult]:
        """Every result stored under this pipeline hash, oldest first."""
        for row in self._rows(f"SELECT pipeline, pipeline_hash, item_key, result, stored_at FROM {TABLE} "
                              f"WHERE pipeline = {self.placeholder} AND pipeline_hash = {self.placeholder} "
                              "ORDER BY stored_at, item_key", [pipeline, pipeline_hash]):
            yield _stored(row)

    def count(self, pipeline: str) -> int:
        """Results stored for this pipeline, under every hash it has had."""
        rows = self._rows(f"SELECT count(*) FROM {TABLE} WHERE pipeline = {self.placeholder}", [pipeline])
        return int(rows[0][0])

    def ping(self) -> None:
        """StoreUnavailable unless the database answers now."""
        self._rows("SELECT 1", [])

    def _rows(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _write(self, sql: str, params: list[Any]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


def _stored(row: tuple[Any, ...]) -> StoredResult:
    pipeline, pipeline_hash, item_key, text, stored_at = row
    value = json.loads(text)
    return StoredResult(pipeline, pipeline_hash, item_key, value if isinstance(value, dict) else {}, str(stored_at))
