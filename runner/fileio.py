"""Writing files so a reader never sees half of one, and the JSON every output uses.

A failed write (disk full, quota, read-only folder) is an OutputError: the run itself
failed (exit 1), and what was already written stays whole."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from runner.errors import RunnerError


class OutputError(RunnerError):
    """An output file could not be written."""

    exit_code = 1


def _umask() -> int:
    """The process umask; read from /proc where it can be, since setting it to read it
    back would briefly change it for every thread."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file."""
    atomic_write_lines(path, (text,))


def atomic_write_lines(path: Path, chunks: Iterable[str]) -> None:
    """atomic_write for text made piece by piece (a file of any size, never whole in memory)."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.fchmod(fd, 0o666 & ~_umask())          # mkstemp makes 0600; honour the umask like open() does
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.writelines(chunks)
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
