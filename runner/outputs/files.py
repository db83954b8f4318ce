"""The append-as-you-go results log (atomic writes live in runner/fileio.py): a failed
append is an OutputError and leaves whole lines only."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from runner.fileio import OutputError, atomic_write, dumps, open_own, utf8

__all__ = ["OutputError", "ResultsLog", "atomic_write", "dumps"]


class ResultsLog:
    """results.jsonl: each result appended as one complete line as soon as it finishes
    (the run's end rewrites the file in input order)."""

    def __init__(self, path: Path):
        self.path = path
        self._size = 0                     # bytes of complete lines written so far
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd: int | None = open_own(path)
        except OSError as exc:
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None

    def append(self, result: dict[str, Any]) -> None:
        """Write one complete line; on failure cut the file back to its last whole line."""
        if self._fd is None:
            return
        data = utf8(dumps(result) + "\n")
        try:
            written = 0
            while written < len(data):
                written += os.write(self._fd, data[written:])
        except OSError as exc:
            try:
                os.ftruncate(self._fd, self._size)
                os.lseek(self._fd, self._size, os.SEEK_SET)
            except OSError:
                pass
            raise OutputError(f"cannot write {self.path}: {exc.strerror or exc}; it keeps the "
                              f"results written before") from None
        self._size += len(data)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
