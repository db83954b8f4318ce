"""Results kept by a content key across runs (`memo:` in a pipeline).

The store is one JSON object {key: result}, written atomically at the end of a run. An
item whose key is in the store reuses the stored result with no step run, whatever the
LLM cache holds; failed items are never stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runner.errors import RunnerError
from runner.fileio import atomic_write, dumps

DEFAULT_STORE = "memo.json"


class MemoStore:
    def __init__(self, path: Path):
        self.path = path
        self.entries: dict[str, dict[str, Any]] = {}
        self.hits = 0
        self.stored = 0
        if path.exists():
            try:
                loaded = json.loads(path.read_text(encoding="utf-8") or "{}")
            except json.JSONDecodeError as exc:
                raise RunnerError(f"{path}: memo store is not valid JSON ({exc.msg} at line {exc.lineno})") from None
            if not isinstance(loaded, dict):
                raise RunnerError(f"{path}: memo store must be a JSON object of key -> result")
            self.entries = loaded

    def get(self, key: str) -> dict[str, Any] | None:
        entry = self.entries.get(key)
        if entry is not None:
            self.hits += 1
        return dict(entry) if isinstance(entry, dict) else None

    def put(self, key: str, result: dict[str, Any]) -> None:
        self.entries[key] = {k: v for k, v in result.items() if k not in ("index", "item_key", "warnings")}
        self.stored += 1

    def save(self) -> None:
        atomic_write(self.path, dumps(self.entries) + "\n")


def store_path(out_dir: Path, store: str | None) -> Path:
    path = Path(store or DEFAULT_STORE)
    return path if path.is_absolute() else out_dir / path


def find_store(location: Path) -> Path:
    """A memo store file: the path itself, or the store inside a folder."""
    if location.is_file():
        return location
    if location.is_dir():
        candidates = [location / "verification_map.json", location / DEFAULT_STORE]
        for candidate in candidates:
            if candidate.is_file():
                return candidate
        stores = sorted(p.name for p in location.glob("*.json") if p.name not in ("summary.json",))
        raise RunnerError(f"{location}: no memo store here (looked for verification_map.json and memo.json"
                          + (f"; found {', '.join(stores)}" if stores else "") + ")")
    raise RunnerError(f"{location}: no such file or folder")
