"""The database a store lives in, SQLite or PostgreSQL, behind one connection: the stores
write their SQL once (`?` placeholders) and run it here, one statement at a time under a
lock, each write its own transaction. SQLite is a file in WAL mode (a killed process keeps
every commit); PostgreSQL (psycopg 3) is a team's shared server, its connection opened again
after it is lost. A database that cannot be reached or used raises StoreUnavailable (503
from `runner serve`), its message without the password.

An SQLite store several processes open at once (`open_shared`: the memo and batch stores) has
WAL, a busy timeout, its tables, and write transactions that lock at once (`transaction`). Two
processes creating one store at once may both get "database is locked" at once (waiting could
deadlock): each tries again until the busy timeout passes."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from runner.errors import RunnerError
from runner.redact import redact, remember, remember_url

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
CHUNK = 500                # keys per IN (...) query: below SQLite's variable limit
CONNECT_TIMEOUT = 5        # seconds to reach the server before a request is answered 503
_LIBPQ_KEYWORDS = re.compile(r"\s*[A-Za-z_]+\s*=")    # libpq's keyword/value form: `host=db dbname=v ...`
BUSY_MS = 30_000          # how long a write waits for another run's transaction
SETUP_RETRY = 0.01        # seconds between tries to set up a store another process is creating


def open_shared(path: Path, schema: str, busy_ms: int = BUSY_MS, check_same_thread: bool = True) -> sqlite3.Connection:
    """An autocommit connection to a WAL store with `schema` created; sqlite3.Error for a file that is no database."""
    # connect's timeout is SQLite's busy timeout: a write waits that long for another run's.
    db = sqlite3.connect(path, timeout=busy_ms / 1000, isolation_level=None, check_same_thread=check_same_thread)
    try:
        deadline = time.monotonic() + busy_ms / 1000
        while True:
            try:
                db.execute("PRAGMA journal_mode = WAL")
                db.executescript(schema)
                return db
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(SETUP_RETRY)
    except BaseException:
        db.close()
        raise


@contextlib.contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction, its lock taken first (BEGIN IMMEDIATE: two runs never both read,
    then both want to write); rolled back on any error, a failed COMMIT's included."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def postgres_sql(sql: str) -> str:
    """A statement written for SQLite (`?` placeholders) as psycopg runs it (`%s`); it may hold no
    literal (`'...'`, `%`), so every `?` is a placeholder."""
    if "'" in sql or "%" in sql:
        raise ValueError(f"an SQL statement holds a literal; pass it as a parameter: {sql[:80]}")
    return sql.replace("?", "%s")


def chunks(keys: Iterable[str]) -> Iterator[tuple[list[str], str]]:
    """The distinct keys, CHUNK at a time, each chunk with its `?, ?, ...` for an IN (...) query."""
    wanted = list(dict.fromkeys(keys))
    for start in range(0, len(wanted), CHUNK):
        chunk = wanted[start:start + CHUNK]
        yield chunk, ", ".join("?" * len(chunk))


class StoreUnavailable(RunnerError):
    """The database cannot be reached or used right now; the message says which and why."""


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


class Database:
    """One connection; `schema` is created on it before its first statement."""

    url = ""              # where it is, for messages: never a password

    def __init__(self, schema: str, what: str):
        self.schema, self.what = schema, what
        self._lock = threading.Lock()

    def rows(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        return self._run(sql, params, fetch=True)

    def write(self, sql: str, params: list[Any]) -> None:
        self._run(sql, params, fetch=False)

    def write_many(self, sql: str, rows: list[list[Any]]) -> None:
        """The statement once per row, all in one transaction: one commit, not one a row."""
        if rows:
            self._run(sql, rows, fetch=False, many=True)

    def _run(self, sql: str, params: list[Any], fetch: bool, many: bool = False) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class SqliteDatabase(Database):
    def __init__(self, path: Path, schema: str, what: str):
        """sqlite3.Error when the file is not a usable database."""
        super().__init__(schema, what)
        self.path, self.url = path, str(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = open_shared(path, schema, check_same_thread=False)
        self._db.execute("PRAGMA synchronous = NORMAL")     # WAL: a commit survives a killed process

    def _run(self, sql: str, params: list[Any], fetch: bool, many: bool = False) -> list[tuple[Any, ...]]:
        try:
            with self._lock:
                if many:
                    with transaction(self._db):
                        self._db.executemany(sql, params)
                    return []
                cursor = self._db.execute(sql, params)
                return cursor.fetchall() if fetch else []
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"{self.what} {self.path}: {exc}") from None

    def close(self) -> None:
        with self._lock:
            self._db.close()


class PostgresDatabase(Database):
    def __init__(self, dsn: str, schema: str, what: str):
        super().__init__(schema, what)
        self._dsn = dsn
        self.url = shown_url(dsn)            # its password remembered: hidden wherever a message quotes it
        self._conn: Any = None
        with contextlib.suppress(StoreUnavailable):     # unreachable: the server starts anyway, each request says so
            self.rows("SELECT 1", [])

    def _run(self, sql: str, params: list[Any], fetch: bool, many: bool = False) -> list[tuple[Any, ...]]:
        import psycopg
        with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(self._dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
                    self._conn.execute(self.schema)
                if many:
                    with self._conn.transaction(), self._conn.cursor() as cursor:
                        cursor.executemany(postgres_sql(sql), params)
                    return []
                cursor = self._conn.execute(postgres_sql(sql) if params else sql, params or None)
                return list(cursor.fetchall()) if fetch else []
            except psycopg.Error as exc:
                self._drop()
                reached = " cannot be reached" if isinstance(exc, psycopg.OperationalError) else ""
                raise StoreUnavailable(f"{self.what} {self.url}{reached}: "
                                       f"{redact(' '.join(str(exc).split()))[:300]}") from None

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):    # closing a broken connection: nothing more to lose
                self._conn.close()
        self._conn = None

    def close(self) -> None:
        with self._lock:
            self._drop()
