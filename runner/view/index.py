"""A run's items as a SQLite index, so a page of a million-item run reads one page of rows.

Built from results.jsonl and calls.jsonl, streamed, into REPORTS_DIR/.runner-view/ (the run
folder is never written), and built again when either changes. Each results line is one row,
in index order, then line order (two results may share an `index`: both are listed and
opened), with its verdict, error, label, reason and whole result (text no UTF-8 can hold
replaced: runner/safetext.py); a full-text index (FTS5) holds its text for search, and where
each of its calls starts in calls.jsonl, so an item's page reads its calls alone."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.errors import InputError
from runner.fileio import parse_json
from runner.llm.calls.file import call_spans, read_spans
from runner.outputs.report_view import item_label, item_reason
from runner.runs.folders import CALLS_FILE, RESULTS
from runner.runs.manifest import strings_in
from runner.safetext import clean_value
from runner.stores.reviews import Review

INDEX_DIR = ".runner-view"
FORMAT = 4
PAGE_SIZE = 50
SEARCH_TEXT = 8000          # characters of an item's text kept for search
_BATCH = 5000
_FIELD = re.compile(r"^[A-Za-z_][\w-]*(\.[\w-]+)*$")
NO_VERDICT = "-"              # shown for a result without a verdict: its status is the pass rule's alone
SORTS = {"index": "pos", "verdict": "verdict", "error": "error", "label": "label"}
LARGEST = 2**63 - 1         # SQLite's largest integer: a larger item number names no item
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_builds = threading.Lock()


@dataclass
class Query:
    verdict: str | None = None
    errors_only: bool = False
    field: str | None = None          # a.b reads nested
    value: str | None = None
    search: str | None = None
    sort: str = "index"               # a column of SORTS, or field:<a.b>
    descending: bool = False
    page: int = 1


@dataclass
class Row:
    pos: int                  # in index order
    line: int                 # in results.jsonl: what tells two results of one index apart
    index: int
    shared: bool              # another result has the same index
    item_key: str
    verdict: str
    error: str | None
    label: str
    reason: str
    passed: bool | None = None    # meets the pipeline's pass rule (None: it has none, or it cannot say)


@dataclass
class Page:
    rows: list[Row]
    matched: int
    page: int
    pages: int


Passed = Callable[[dict[str, Any]], bool | None]            # result -> meets the pass rule
ITEMS = """CREATE TABLE {} (pos INTEGER PRIMARY KEY, line INTEGER NOT NULL, idx INTEGER NOT NULL,
                            shared INTEGER NOT NULL DEFAULT 0, item_key TEXT, verdict TEXT, error TEXT,
                            label TEXT, reason TEXT, body TEXT)"""
_COLUMNS = "line, idx, shared, item_key, verdict, error, label, reason, body"


class RunIndex:
    def __init__(self, reports: Path, run: Path, verdict_field: str | None, columns: list[str] | None,
                 passed: Passed | None = None, reason_field: str | None = None):
        """`passed`: the pipeline's pass rule, read for the rows a page shows (None: it has none);
        `columns` and `reason_field`: the report's, which give a row its label and reason."""
        self.run = run
        self.verdict_field = verdict_field
        self.columns = columns
        self.reason_field = reason_field
        self.passed = passed
        relative = run.resolve().relative_to(reports.resolve())
        self.path = reports / INDEX_DIR / relative.parent / f"{relative.name}.sqlite"

    def _calls_file(self) -> Path | None:
        """The run's calls.jsonl; None for a link in its place, which is not followed (it
        could show a file from outside the run folder)."""
        path = self.run / CALLS_FILE
        return None if path.is_symlink() else path

    def _stamp(self) -> str:
        stat, calls_file, called = (self.run / RESULTS).stat(), self._calls_file(), "-"
        with contextlib.suppress(OSError):
            if calls_file:
                calls = calls_file.stat()
                called = f"{calls.st_size}:{calls.st_mtime_ns}"
        return f"{FORMAT}:{stat.st_size}:{stat.st_mtime_ns}:{called}:{self.verdict_field}"

    def _fresh(self) -> bool:
        try:                            # no index yet: sqlite cannot open it read-only
            with sqlite3.connect(f"file:{self.path}?mode=ro", uri=True) as db:
                row = db.execute("SELECT value FROM meta WHERE name = 'stamp'").fetchone()
        except sqlite3.DatabaseError:
            return False
        return bool(row) and row[0] == self._stamp()

    def _build(self) -> None:
        stamp = self._stamp()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        temporary.unlink(missing_ok=True)
        db = sqlite3.connect(temporary)
        try:
            db.executescript("""
                PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;
                CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT);
                CREATE VIRTUAL TABLE search USING fts5(text, content='', tokenize='unicode61');
                CREATE TABLE calls (idx INTEGER, offset INTEGER, length INTEGER);
            """)
            db.execute(ITEMS.format("items"))
            counts: Counter[str] = Counter()
            batch: list[tuple[Any, ...]] = []
            texts: list[tuple[int, str]] = []
            ordered, last = True, 0
            for number, result in self._results():
                index = _as_index(result.get("index"), number)
                ordered, last = ordered and index >= last, index
                label = item_label(result, self.columns)
                error = result.get("error")      # the list shows an item without a reason by its error
                # without report columns, the report's are the results' fields as they come
                reason = item_reason(result, self.columns or list(result), self.reason_field) or \
                    (error if isinstance(error, str) else "")
                verdict = self.verdict_of(result)
                counts[verdict] += 1
                batch.append((number, number, index, str(result.get("item_key") or ""), verdict,
                              _text(result.get("error")) or None, label, reason,
                              json.dumps(result, ensure_ascii=False)))
                texts.append((number, " ".join(strings_in(result, numbers=True))[:SEARCH_TEXT]))
                if len(batch) >= _BATCH:
                    _flush(db, batch, texts)
            _flush(db, batch, texts)
            if not ordered:             # a killed run's, in finishing order: numbered again in index order
                db.execute(ITEMS.format("sorted"))
                db.execute(f"INSERT INTO sorted ({_COLUMNS}) SELECT {_COLUMNS} FROM items ORDER BY idx, line")
                db.executescript("DROP TABLE items; ALTER TABLE sorted RENAME TO items;")
            calls_file = self._calls_file()
            if calls_file is not None:
                db.executemany("INSERT INTO calls VALUES (?, ?, ?)", call_spans(calls_file))
            db.executescript("CREATE INDEX by_index ON items (idx); CREATE INDEX by_line ON items (line);"
                             "CREATE INDEX by_verdict ON items (verdict); CREATE INDEX by_error ON items (error);"
                             "CREATE INDEX by_key ON items (item_key); CREATE INDEX by_item ON calls (idx);")
            db.execute("UPDATE items SET shared = 1 WHERE idx IN "
                       "(SELECT idx FROM items GROUP BY idx HAVING count(*) > 1)")
            db.executemany("INSERT INTO meta VALUES (?, ?)", [
                ("counts", json.dumps(dict(counts.most_common()))), ("stamp", stamp)])
            db.commit()
        finally:
            db.close()
        os.replace(temporary, self.path)

    def _results(self) -> Iterator[tuple[int, dict[str, Any]]]:
        with (self.run / RESULTS).open(encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    result = parse_json(line, RESULTS, number)      # too deep, too many digits: a message too
                except InputError as exc:
                    result = {"index": number, "error": str(exc)}
                yield number, clean_value(result) if isinstance(result, dict) else {"index": number, "value": result}

    def verdict_of(self, result: dict[str, Any]) -> str:
        value = result.get(self.verdict_field) if self.verdict_field else None
        if value is None:
            return "ERROR" if result.get("error") else NO_VERDICT
        return _text(value)

    def _connect(self) -> sqlite3.Connection:
        """A read-only connection to the index, built first unless it matches results.jsonl as it is
        now (one build at a time)."""
        if not self._fresh():
            with _builds:
                if not self._fresh():
                    self._build()
        return sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)

    def page(self, query: Query) -> Page:
        where, args = _where(query)
        order = _order(query)
        with self._connect() as db:
            matched = db.execute(f"SELECT count(*) FROM items {where}", args).fetchone()[0]
            pages = max(1, -(-matched // PAGE_SIZE))
            page = min(max(1, query.page), pages)
            found = db.execute(f"SELECT {_ROW} FROM items {where} {order} LIMIT ? OFFSET ?",
                               [*args, PAGE_SIZE, (page - 1) * PAGE_SIZE])
            rows = [Row(*row) for row in found]
            if self.passed is not None and rows:
                bodies = db.execute(f"SELECT pos, body FROM items WHERE pos IN ({', '.join('?' * len(rows))})",
                                    [row.pos for row in rows])
                results = {pos: json.loads(body) for pos, body in bodies}
                for row in rows:
                    row.passed = self.passed(results[row.pos])
        return Page(rows, matched, page, pages)

    def counts(self) -> dict[str, int]:
        """Items by verdict, most first (counted when the index was built)."""
        with self._connect() as db:
            row = db.execute("SELECT value FROM meta WHERE name = 'counts'").fetchone()
        return dict(json.loads(row[0])) if row else {}

    def calls(self, index: int) -> list[dict[str, Any]]:
        """The item's calls, from calls.jsonl, in the order they ended."""
        with self._connect() as db:
            spans = db.execute("SELECT offset, length FROM calls WHERE idx = ? ORDER BY offset", (index,)).fetchall()
        calls_file = self._calls_file()
        return read_spans(calls_file, spans) if calls_file else []

    def agreement(self, reviews: Path, pipeline: str) -> dict[str, int]:
        """How reviewers agree with this run's verdicts, over every reviewed item of the run:
        a review agrees when its right verdict (given, or the judged one it approved) is this
        run's verdict, and disagrees when it names another or rejects this very verdict."""
        found = {"reviewed": 0, "agree": 0, "disagree": 0, "total_reviews": 0}
        if not reviews.is_file():
            return found
        with self._connect() as db:
            db.execute("ATTACH DATABASE ? AS r", (f"file:{reviews}?mode=ro",))
            found["total_reviews"] = db.execute("SELECT count(*) FROM r.reviews WHERE pipeline = ?",
                                                (pipeline,)).fetchone()[0]
            rows = db.execute("SELECT i.item_key, i.verdict, v.agrees, v.judged, v.correct FROM r.reviews v "
                              "JOIN items i ON i.item_key = v.item_key WHERE v.pipeline = ?", (pipeline,))
            keys = set()
            for key, verdict, agrees, judged, correct in rows:
                keys.add(key)
                right = Review(pipeline, key, "", bool(agrees), judged, correct).label
                if right is not None:
                    found["agree" if right == verdict else "disagree"] += 1
                elif judged == verdict:
                    found["disagree"] += 1
            found["reviewed"] = len(keys)
        return found

    def item(self, index: int, line: int | None = None) -> tuple[Row, dict[str, Any]] | None:
        """The result numbered `index`: the one on results line `line` when given (two results
        may share an index), else the first; None when there is none."""
        if not (0 <= index <= LARGEST and 0 <= (line or 0) <= LARGEST):
            return None
        with self._connect() as db:
            found = db.execute(f"SELECT {_ROW}, body FROM items WHERE idx = ? AND (? IS NULL OR line = ?) "
                               "ORDER BY pos LIMIT 1", (index, line, line)).fetchone()
        if found is None:
            return None
        row, result = Row(*found[:-1]), json.loads(found[-1])
        row.passed = self.passed(result) if self.passed else None
        return row, result

    def neighbours(self, row: Row) -> tuple[Row | None, Row | None]:
        """The results before and after this one, in index order."""
        with self._connect() as db:
            before = db.execute(f"SELECT {_ROW} FROM items WHERE pos < ? ORDER BY pos DESC LIMIT 1",
                                (row.pos,)).fetchone()
            after = db.execute(f"SELECT {_ROW} FROM items WHERE pos > ? ORDER BY pos LIMIT 1", (row.pos,)).fetchone()
        return (Row(*before) if before else None), (Row(*after) if after else None)


_ROW = "pos, line, idx, shared, item_key, verdict, error, label, reason"


def _flush(db: sqlite3.Connection, batch: list[tuple[Any, ...]], texts: list[tuple[int, str]]) -> None:
    db.executemany("INSERT INTO items (pos, line, idx, item_key, verdict, error, label, reason, body) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", batch)
    db.executemany("INSERT INTO search (rowid, text) VALUES (?, ?)", texts)
    batch.clear()
    texts.clear()


def _where(query: Query) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    args: list[Any] = []
    if query.verdict:
        clauses.append("verdict = ?")
        args.append(query.verdict)
    if query.errors_only:
        clauses.append("error IS NOT NULL")
    if query.field:
        clauses.append(f"CAST(json_extract(body, ?) AS TEXT) {'= ?' if query.value else 'IS NULL'}")
        args.append(json_path(query.field))
        if query.value:
            args.append({"true": "1", "false": "0"}.get(query.value.lower(), query.value))
    search = _CONTROL.sub(" ", query.search or "")
    if search.strip():
        terms = " ".join('"' + term.replace('"', '""') + '"' for term in search.split())
        clauses.append("line IN (SELECT rowid FROM search WHERE search MATCH ?)")
        args.append(terms)
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", args


def _order(query: Query) -> str:
    direction = "DESC" if query.descending else "ASC"
    if query.sort.startswith("field:"):
        return f"ORDER BY json_extract(body, '{json_path(query.sort[6:])}') {direction}, pos"
    column = SORTS.get(query.sort, "pos")
    return f"ORDER BY {column} {direction}" + (", pos" if column != "pos" else "")


def json_path(name: str) -> str:
    """`a.b` -> `$."a"."b"`; a name that is not a dotted field is refused (never put in SQL)."""
    if not _FIELD.match(name):
        raise InputError(f"field '{name}': give a result field such as verdict or citation.file")
    return "$" + "".join(f'."{part}"' for part in name.split("."))


def _as_index(value: Any, fallback: int) -> int:
    """A result's index, or its line number when it has none SQLite can hold."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= LARGEST else fallback


def _text(value: Any) -> str:
    """A value as the index keeps it: JSON's text (`true`, `3`) but a string as itself and no value as ``."""
    return "" if value is None else value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
