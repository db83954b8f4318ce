"""Submitted provider batches, on disk before anyone polls them: one SQLite file in the cache folder.

A submission is written (with a local id sent as the batch's metadata) before the batch is
created, and its provider id right after, so a run stopped at any point and started again finds
its batches by the cache keys of their requests, and polls them instead of paying twice. The
requests are claimed in the transaction that looks for them (`claim`): of two runs submitting at
once, the second adopts the first's. Who is creating a batch (host and process) is kept beside
it: a run adopting it waits for its id, or looks for it at the provider once its creator died."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.errors import RunnerError
from runner.stores.database import open_shared, transaction

STORE_FILE = "batches.sqlite3"
TERMINAL = ("completed", "failed", "expired", "cancelled")
KEEP_SECONDS = 30 * 86400        # a provider keeps batch files about as long
CREATING_SECONDS = 600           # a batch created on another machine: that long, it is taken to be on its way

SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    submission TEXT PRIMARY KEY, batch_id TEXT, model_name TEXT NOT NULL, model TEXT NOT NULL,
    api_base TEXT, status TEXT NOT NULL, requests INTEGER NOT NULL, counts TEXT NOT NULL DEFAULT '{}',
    message TEXT NOT NULL DEFAULT '', created REAL NOT NULL, updated REAL NOT NULL,
    collected INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS requests (
    custom_id TEXT NOT NULL, submission TEXT NOT NULL, PRIMARY KEY (custom_id, submission));
CREATE INDEX IF NOT EXISTS requests_by_submission ON requests (submission);
CREATE TABLE IF NOT EXISTS creators (submission TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL);
"""
HOLDING = ("SELECT b.* FROM requests r JOIN batches b ON b.submission = r.submission "
           "WHERE r.custom_id = ? AND b.model = ? AND b.api_base IS ? AND b.collected = 0 AND b.status NOT IN "
           "('failed', 'expired', 'cancelled') ORDER BY b.created DESC LIMIT 1")


class BatchStoreUnusable(RunnerError):
    """batches.sqlite3 cannot be opened (not a database, unreadable)."""


def unusable(path: Path, exc: Exception) -> BatchStoreUnusable:
    return BatchStoreUnusable(
        f"{path}: not a usable batch store ({exc}): move it aside (or delete it) and run again. The batches it "
        f"listed are then not polled: their calls are submitted again, and any still running at the provider "
        f"can be cancelled there")


def check_store(folder: Path) -> None:
    """BatchStoreUnusable now, before a run that batches, rather than an error for every item."""
    if (folder / STORE_FILE).exists():
        BatchStore(folder).close()


@dataclass(frozen=True)
class BatchRecord:
    submission: str
    batch_id: str | None
    model_name: str
    model: str
    api_base: str | None
    status: str
    requests: int
    counts: dict[str, int]
    message: str
    created: float
    updated: float

    @property
    def pending(self) -> bool:
        return self.status not in TERMINAL


class BatchStore:
    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / STORE_FILE
        try:
            self._db = open_shared(self.path, SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise unusable(self.path, exc) from None
        try:
            self.prune()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise unusable(self.path, exc) from None

    def claim(self, submission: str, model_name: str, model: str, api_base: str | None,
              custom_ids: Iterable[str]) -> dict[str, BatchRecord]:
        """In one transaction: the requests another batch already holds (as `holding` finds
        them), and the rest recorded as this submission's, a batch about to be created (status
        `submitting`, by this process). Returns the ones held elsewhere, by custom_id."""
        now = time.time()
        with transaction(self._db) as db:
            rows = {custom_id: db.execute(HOLDING, (custom_id, model, api_base)).fetchone() for custom_id in custom_ids}
            held = {custom_id: _record(row) for custom_id, row in rows.items() if row}
            rest = [custom_id for custom_id, row in rows.items() if not row]
            if rest:
                db.execute("INSERT INTO batches VALUES (?, NULL, ?, ?, ?, 'submitting', ?, '{}', '', ?, ?, 0)",
                           (submission, model_name, model, api_base, len(rest), now, now))
                db.executemany("INSERT OR IGNORE INTO requests VALUES (?, ?)", ((c, submission) for c in rest))
                db.execute("INSERT OR REPLACE INTO creators VALUES (?, ?, ?)",
                           (submission, socket.gethostname(), os.getpid()))
        return held

    def being_created(self, record: BatchRecord) -> bool:
        """Whether a batch with no provider id yet is still on its way: its creator runs (on this
        machine), or it was recorded on another machine less than CREATING_SECONDS ago."""
        row = self._db.execute("SELECT host, pid FROM creators WHERE submission = ?", (record.submission,)).fetchone()
        if row is None:
            return False
        host, pid = str(row[0]), int(row[1])
        if host != socket.gethostname():
            return time.time() - record.updated < CREATING_SECONDS
        try:
            os.kill(pid, 0)              # signal 0: only whether the process is there
        except ProcessLookupError:
            return False
        except PermissionError:          # another user's process
            pass
        return True

    def submitted(self, submission: str, batch_id: str, status: str) -> None:
        with transaction(self._db) as db:
            db.execute("UPDATE batches SET batch_id = ?, status = ?, updated = ? WHERE submission = ?",
                       (batch_id, status, time.time(), submission))
            db.execute("DELETE FROM creators WHERE submission = ?", (submission,))

    def update(self, submission: str, status: str, counts: dict[str, int] | None = None, message: str = "") -> None:
        self._update(submission, status=status, counts=json.dumps(counts or {}), message=message)

    def _update(self, submission: str, **fields: object) -> None:
        sets = ", ".join(f"{name} = ?" for name in fields)
        with transaction(self._db) as db:
            db.execute(f"UPDATE batches SET {sets}, updated = ? WHERE submission = ?",   # noqa: S608 - fixed names
                       (*fields.values(), time.time(), submission))

    def collected(self, submission: str) -> None:
        """Its answers reached their calls: a later run sends a call that failed again rather
        than reading the same answer back."""
        self._update(submission, collected=1)

    def forget(self, submission: str) -> None:
        with transaction(self._db) as db:
            _delete(db, [submission])

    def holding(self, custom_id: str, api_base: str | None, model: str) -> BatchRecord | None:
        """The newest batch of this endpoint and model that holds the request and may still
        answer it: pending, or completed but never collected (its run stopped first)."""
        row = self._db.execute(HOLDING, (custom_id, model, api_base)).fetchone()
        return _record(row) if row else None

    def get(self, submission: str) -> BatchRecord | None:
        row = self._db.execute("SELECT * FROM batches WHERE submission = ?", (submission,)).fetchone()
        return _record(row) if row else None

    def all(self, pending_only: bool = False) -> list[BatchRecord]:
        records = map(_record, self._db.execute("SELECT * FROM batches ORDER BY created").fetchall())
        return [r for r in records if r.pending or not pending_only]

    def prune(self) -> None:
        """Drop finished batches older than their files' lifetime."""
        cutoff = time.time() - KEEP_SECONDS
        with transaction(self._db) as db:
            _delete(db, [r[0] for r in db.execute("SELECT submission FROM batches WHERE updated < ? AND status IN "
                                                  "('completed', 'failed', 'expired', 'cancelled')", (cutoff,))])

    def close(self) -> None:
        self._db.close()


def _delete(db: sqlite3.Connection, submissions: list[str]) -> None:
    for table in ("requests", "creators", "batches"):
        db.executemany(f"DELETE FROM {table} WHERE submission = ?", ((s,) for s in submissions))  # noqa: S608


def _record(row: tuple[Any, ...]) -> BatchRecord:
    """A row of `batches` as a record (SQLite gives each column its declared type)."""
    submission, batch_id, model_name, model, api_base, status, requests, counts, message, created, updated, _ = row
    return BatchRecord(submission, batch_id, model_name, model, api_base, status, requests, json.loads(counts),
                       message, created, updated)
