"""Writing files so a reader never sees half of one, and the JSON every output uses.

A failed write (disk full, quota, read-only folder) is an OutputError: the run itself
failed (exit 1), and what was already written stays whole."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from runner.errors import RunnerError
from runner.safetext import dumps, utf8

__all__ = ["OutputError", "atomic_write", "dumps", "open_own", "utf8"]

# A file runner writes in its output folder is opened without following a symlink planted
# in its place (ELOOP): a link there never sends a write outside the folder.
NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)


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
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.fchmod(fd, 0o666 & ~_umask())          # mkstemp makes 0600; honour the umask like open() does
        with os.fdopen(fd, "wb") as handle:
            handle.write(utf8(text))
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


def open_own(path: Path | str, flags: int = os.O_WRONLY | os.O_CREAT | os.O_TRUNC) -> int:
    """os.open of a file the run writes (mode 0666 less the umask), refusing a symlink in its place."""
    return os.open(path, flags | NO_FOLLOW, 0o666)
