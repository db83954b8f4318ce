"""Results kept by a content key across runs (`memo:` in a pipeline).

An item whose key is in the store reuses the stored result with no step run, whatever the
LLM cache holds; failed items are never stored. The store is an SQLite database
(runner/stores/memo_sqlite.py) written as each item finishes; a store configured as
`name.json` lives in `name.sqlite` beside it, and an existing `name.json` (the format
of earlier versions) is imported into it once."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from runner.errors import RunnerError
from runner.stores.kept import without_reads
from runner.stores.memo_sqlite import SqliteMemo, database_path

DEFAULT_STORE = "memo.json"
STORE_NAMES = ("verification_map", "memo")


class MemoStore:
    def __init__(self, path: Path):
        self.configured = path
        self.path = database_path(path)
        self.hits = 0
        self.stored = 0
        self._db = SqliteMemo(self.path, path if path.suffix == ".json" else None)

    def get(self, key: str, usable: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None
            ) -> dict[str, Any] | None:
        """The stored result (as `usable` takes it: None when it may not be reused), counted as a hit."""
        entry = self._db.get(key)
        if entry is not None and usable is not None:
            entry = usable(entry)
        if entry is not None:
            self.hits += 1
        return entry

    @property
    def unreadable(self) -> int:
        """Stored results read so far that were not JSON objects (each a miss)."""
        return self._db.unreadable

    def put(self, key: str, result: dict[str, Any]) -> None:
        self._db.put(key, {k: v for k, v in result.items() if k not in ("index", "item_key", "warnings")})
        self.stored += 1

    def items(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every stored (key, result), read one at a time (without the notes of what made it)."""
        return ((key, without_reads(result)) for key, result in self._db.items())

    def __len__(self) -> int:
        return len(self._db)

    def save(self) -> None:
        """Every entry is already stored as its item finished: this only closes the database."""
        self._db.close()


def store_path(out_dir: Path, store: str | None) -> Path:
    path = Path(store or DEFAULT_STORE)
    return path if path.is_absolute() else out_dir / path


def find_store(location: Path) -> Path:
    """A memo store: the path itself (its database or its JSON), or the store inside a folder."""
    if location.is_file():
        return location
    if location.is_dir():
        for name in STORE_NAMES:
            for suffix in (".sqlite", ".json"):
                if (location / f"{name}{suffix}").is_file():
                    return location / f"{name}.json"
        stores = sorted(p.name for p in location.glob("*.json") if p.name not in ("summary.json",))
        raise RunnerError(f"{location}: no memo store here (looked for verification_map.json and memo.json"
                          + (f"; found {', '.join(stores)}" if stores else "") + ")")
    raise RunnerError(f"{location}: no such file or folder")
