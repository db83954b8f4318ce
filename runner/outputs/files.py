"""The append-as-you-go results log (atomic writes live in runner/fileio.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..fileio import atomic_write, dumps

__all__ = ["ResultsLog", "atomic_write", "dumps"]


class ResultsLog:
    """results.jsonl: each result appended as one complete line as soon as it finishes
    (the run's end rewrites the file in input order)."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = path.open("w", encoding="utf-8")

    def append(self, result: dict[str, Any]) -> None:
        # One write call per complete line: a crash leaves whole lines only.
        self._handle.write(dumps(result) + "\n")
        self._handle.flush()

    def close(self) -> None:
        if not self._handle.closed:
            self._handle.close()
