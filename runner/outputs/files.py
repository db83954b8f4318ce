"""Atomic writes and the append-as-you-go results log.

A failed write (disk full, quota, read-only folder) is an OutputError: the run itself
failed (exit 1), and what was already written stays whole."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..errors import RunnerError


class OutputError(RunnerError):
    """An output file could not be written."""

    exit_code = 1


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.fchmod(fd, 0o666 & ~_umask())          # mkstemp makes 0600; honour the umask like open() does
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        raise


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


class ResultsLog:
    """results.jsonl: each result appended as one complete line as soon as it finishes
    (the run's end rewrites the file in input order)."""

    def __init__(self, path: Path):
        self.path = path
        self._size = 0                     # bytes of complete lines written so far
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        except OSError as exc:
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None

    def append(self, result: dict[str, Any]) -> None:
        """Write one complete line; on failure cut the file back to its last whole line."""
        if self._fd is None:
            return
        data = (dumps(result) + "\n").encode("utf-8")
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
