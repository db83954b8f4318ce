"""An SQLite store that several runs open at once: WAL, a busy timeout, its tables, and
write transactions taken at once (`transaction`).

Two processes creating the same store at the same moment may both read the new file and
then both want it to themselves (to switch it to WAL, to create the tables). SQLite then
answers "database is locked" at once instead of waiting, as waiting could deadlock; one of
them goes on, and the other tries again here until the busy timeout passes."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BUSY_MS = 30_000          # how long a write waits for another run's transaction
SETUP_RETRY = 0.01        # seconds between tries to set up a store another process is creating


def open_shared(path: Path, schema: str, busy_ms: int = BUSY_MS, check_same_thread: bool = True) -> sqlite3.Connection:
    """A connection in autocommit mode, its store in WAL with `schema` created; sqlite3.Error
    for a file that is not a usable database."""
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


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction on an autocommit connection, its lock taken first (BEGIN
    IMMEDIATE: two runs never both read and then both want to write); rolled back on any error,
    a failed COMMIT's included (the lock is never kept for the rest of the run)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
