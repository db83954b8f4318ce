"""The review store in PostgreSQL: `runner serve`'s feedback goes to the database its results
are in when that is PostgreSQL (a team's shared server keeps one database), in the table
`runner_reviews`, over the result store's connection (its reconnection, its lock, its
StoreUnavailable: 503). `runner labels export --db URL` reads it."""

from __future__ import annotations

from typing import Any

from runner.stores.result_store_postgres import PostgresResultStore
from runner.stores.reviews import SCHEMA, ReviewStore


class PostgresReviewStore(ReviewStore):
    table = "runner_reviews"
    placeholder = "%s"

    def __init__(self, results: PostgresResultStore, owns: bool = False):
        """Over `results`' connection (not ReviewStore's SQLite file); `owns`: close it on close."""
        self._results = results
        self._owns = owns
        self.where = results.url
        self._ready = False

    def _execute(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        if not self._ready:
            self._results._write(SCHEMA.format(table=self.table), [])
            self._ready = True
        if sql.lstrip().upper().startswith("SELECT"):
            return self._results._rows(sql, params)
        self._results._write(sql, params)
        return []

    def close(self) -> None:
        """The connection is the result store's: closed here only when this store owns it."""
        if self._owns:
            self._results.close()
