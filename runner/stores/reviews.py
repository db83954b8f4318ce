"""People's reviews of verdicts, the one feedback store: `runner view`, `runner serve`'s
feedback route and `runner feedback` all write it, each review made by `review_of` (so one
rule says what a review may say) and given by `record_review` (runner/tracing/feedback.py).
SQLite beside the runs (REPORTS_DIR/reviews.sqlite), or PostgreSQL beside `runner serve`'s
results; keyed by pipeline and `item_key` (a hash of the input), so a review follows its item
into every later run of it. One row per reviewer and item (a second review replaces the
first), each write its own transaction."""

from __future__ import annotations

import getpass
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.errors import InputError
from runner.fileio import now
from runner.stores.database import Database, SqliteDatabase, chunks

if TYPE_CHECKING:
    from runner.stores.result_store import ResultStore

REVIEWS_FILE = "reviews.sqlite"
MAX_REVIEWER, MAX_LABEL, MAX_RATIONALE = 100, 200, 5000     # characters kept of each

TABLE = "reviews"
SCHEMA = """
CREATE TABLE IF NOT EXISTS {table} (
    pipeline    TEXT NOT NULL,
    item_key    TEXT NOT NULL,
    reviewer    TEXT NOT NULL,
    agrees      INTEGER NOT NULL,   -- 1: the judge's verdict is right; 0: it is wrong
    judged      TEXT,               -- the verdict the reviewer saw
    correct     TEXT,               -- the right verdict, when the reviewer gave it
    rationale   TEXT,
    run         TEXT,               -- the run folder (under REPORTS_DIR) it was reviewed in
    item_index  BIGINT,
    trace_id    TEXT,
    reviewed_at TEXT NOT NULL,
    PRIMARY KEY (pipeline, item_key, reviewer)
);
"""


@dataclass(frozen=True)
class Review:
    pipeline: str
    item_key: str
    reviewer: str
    agrees: bool
    judged: str | None = None
    correct: str | None = None
    rationale: str | None = None
    run: str | None = None
    item_index: int | None = None
    trace_id: str | None = None
    reviewed_at: str = ""

    @property
    def label(self) -> str | None:
        """The right verdict as this review tells it: the one given, else the judged one when
        the reviewer agrees; a disagreement that names no right verdict tells none."""
        if self.correct not in (None, ""):
            return self.correct
        return self.judged if self.agrees else None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


_COLUMNS = tuple(field.name for field in fields(Review))      # the table's columns, in its order
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM {{table}}"


class ReviewRefused(InputError):
    """A review that contradicts itself or names a verdict the pipeline cannot give (HTTP 400, exit 2)."""


def review_of(pipeline: str, item_key: str, judged: str | None, agrees: bool, *, label: str | None = None,
              rationale: str | None = None, reviewer: str | None = None, verdicts: Sequence[str] | None = None,
              run: str | None = None, item_index: int | None = None, trace_id: str | None = None) -> Review:
    """A person's review of the verdict `judged` (None: the result has none): `agrees` and the
    right verdict (`label`), refused (ReviewRefused) when they contradict each other or the
    label is not one of the pipeline's `verdicts` (when known)."""
    correct = (label or "").strip()[:MAX_LABEL] or None
    if correct is not None:
        if verdicts and correct not in verdicts:
            raise ReviewRefused(f"label '{correct}' is not a verdict {pipeline} gives (its verdicts: "
                                f"{', '.join(verdicts)})")
        if agrees and judged is not None and correct != judged:
            raise ReviewRefused(f"a thumbs-up says the verdict {judged} is right, and label '{correct}' says it is "
                                f"wrong: send a thumbs-down with label '{correct}', or no label")
        if not agrees and correct == judged:
            raise ReviewRefused(f"a thumbs-down says the verdict {judged} is wrong, and label '{correct}' is that "
                                "verdict: send a thumbs-up, or the right verdict as the label")
    return Review(pipeline=pipeline, item_key=item_key, reviewer=(reviewer or "").strip()[:MAX_REVIEWER] or os_user(),
                  agrees=agrees, judged=judged, correct=correct,
                  rationale=(rationale or "").strip()[:MAX_RATIONALE] or None, run=run, item_index=item_index,
                  trace_id=trace_id or None)


class ReviewStore:
    """The reviews in SQLite (REPORTS_DIR/reviews.sqlite), or beside `runner serve`'s PostgreSQL results (`beside`)."""

    def __init__(self, path: Path, create: bool = True):
        if not create and not path.is_file():
            raise InputError(f"{path}: no review store there (reviews are made in `runner view`)")
        try:
            self._db: Database = SqliteDatabase(path, SCHEMA.format(table=TABLE), "review store")
        except sqlite3.DatabaseError as exc:
            raise InputError(f"{path}: not a usable review store ({exc})") from None
        self.path, self.table, self._owns, self._schema = path, TABLE, True, ""

    @classmethod
    def beside(cls, results: ResultStore, owns: bool = False) -> ReviewStore:
        """The table `runner_reviews` in the results' PostgreSQL database, over their connection
        (its reconnection, its lock, its StoreUnavailable: 503); `owns`: close it on close."""
        store = cls.__new__(cls)
        store._db, store.table, store._owns = results.db, "runner_reviews", owns
        store._schema = SCHEMA.format(table=store.table)       # made on first use: the server may be down now
        return store

    def _ready(self) -> Database:
        if self._schema:
            self._db.write(self._schema, [])
            self._schema = ""
        return self._db

    def _rows(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        return self._ready().rows(sql.format(table=self.table), params)

    def put(self, review: Review) -> Review:
        stamped = review if review.reviewed_at else replace(review, reviewed_at=now())
        values = {**stamped.as_dict(), "agrees": int(stamped.agrees)}
        marks = ", ".join("?" * len(_COLUMNS))
        self._ready().write(f"INSERT INTO {self.table} ({', '.join(_COLUMNS)}) VALUES ({marks}) "
                            "ON CONFLICT (pipeline, item_key, reviewer) DO UPDATE SET "
                            + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[3:]),
                            [values[c] for c in _COLUMNS])
        return stamped

    def for_items(self, pipeline: str, keys: Iterable[str]) -> dict[str, list[Review]]:
        """The reviews of these items, by item key (reviewers in name order)."""
        found: dict[str, list[Review]] = {}
        for chunk, marks in chunks(keys):
            for row in self._rows(f"{_SELECT} WHERE pipeline = ? AND item_key IN ({marks}) ORDER BY reviewer",
                                  [pipeline, *chunk]):
                review = _review(row)
                found.setdefault(review.item_key, []).append(review)
        return found

    def of_pipeline(self, pipeline: str) -> Iterator[Review]:
        rows = self._rows(f"{_SELECT} WHERE pipeline = ? ORDER BY item_key, reviewed_at, reviewer", [pipeline])
        return (_review(row) for row in rows)

    def pipelines(self) -> list[str]:
        return [row[0] for row in self._rows("SELECT DISTINCT pipeline FROM {table} ORDER BY pipeline", [])]

    def close(self) -> None:
        """The connection is the result store's when `beside` them: closed only when this store owns it."""
        if self._owns:
            self._db.close()


def _review(row: tuple[Any, ...]) -> Review:
    values = dict(zip(_COLUMNS, row, strict=True))
    return Review(**{**values, "agrees": bool(values["agrees"])})


def os_user() -> str:
    """Who a review (or feedback) is from when nobody says: the login name."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):      # no login name (e.g. a container's numeric uid)
        return "unknown"
