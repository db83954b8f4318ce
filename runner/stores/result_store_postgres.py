"""The result store in PostgreSQL (psycopg 3): what a team's server shares. One connection,
one statement at a time, autocommit (each write its own transaction); a lost connection is
opened again on the next query, and a server that cannot be reached is StoreUnavailable
(503 from `runner serve`), its message without the password."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from runner.redact import redact
from runner.stores.result_store import SCHEMA, ResultStore, StoreUnavailable, shown_url

CONNECT_TIMEOUT = 5        # seconds to reach the server before a request is answered 503


class PostgresResultStore(ResultStore):
    placeholder = "%s"

    def __init__(self, dsn: str):
        self._dsn = dsn
        self.url = shown_url(dsn)            # its password remembered: hidden wherever a message quotes it
        self._lock = threading.Lock()
        self._conn: Any = None
        self._ready = False
        with contextlib.suppress(StoreUnavailable):     # unreachable: the server starts anyway, each request says so
            self._rows("SELECT 1", [])

    def _connection(self) -> Any:
        import psycopg
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self._dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
            self._ready = False
        if not self._ready:
            self._conn.execute(SCHEMA)
            self._ready = True
        return self._conn

    def _rows(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        return self._run(sql, params, fetch=True)

    def _write(self, sql: str, params: list[Any]) -> None:
        self._run(sql, params, fetch=False)

    def _run(self, sql: str, params: list[Any], fetch: bool) -> list[tuple[Any, ...]]:
        import psycopg
        with self._lock:
            try:
                cursor = self._connection().execute(sql, params)
                return list(cursor.fetchall()) if fetch else []
            except psycopg.OperationalError as exc:
                self._drop()
                raise StoreUnavailable(f"result store {self.url} cannot be reached: "
                                       f"{redact(' '.join(str(exc).split()))[:300]}") from None
            except psycopg.Error as exc:
                self._drop()
                raise StoreUnavailable(f"result store {self.url}: {redact(' '.join(str(exc).split()))[:300]}") \
                    from None

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):    # closing a broken connection: nothing more to lose
                self._conn.close()
        self._conn = None

    def close(self) -> None:
        with self._lock:
            self._drop()
