"""Files a pipeline opens stay inside their declared root. The statuses are part of the
read_lines contract.

A name is refused when it is empty, absolute, holds `..` or a NUL, or resolves (after
every symlink) outside the root; only regular files are opened (never a device, FIFO
or socket), and a file over a size bound is refused rather than read whole."""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath, PureWindowsPath

OK, FILE_NOT_FOUND, LINES_NOT_FOUND, PATH_OUTSIDE_ROOT = "OK", "FILE_NOT_FOUND", "LINES_NOT_FOUND", "PATH_OUTSIDE_ROOT"
FILE_TOO_LARGE = "FILE_TOO_LARGE"
MAX_FILE_BYTES = 64 * 1024 * 1024     # a source file bigger than this is refused, not read whole


def resolve_inside(root: Path, name: str) -> tuple[Path | None, str]:
    """The real path of the regular file `name` under `root`, or the status saying why not."""
    if not name or "\x00" in name or PurePosixPath(name).is_absolute() or PureWindowsPath(name).is_absolute() \
            or ".." in PurePosixPath(name.replace("\\", "/")).parts:
        return None, PATH_OUTSIDE_ROOT
    try:
        real_root = root.resolve()
        candidate = (real_root / name).resolve()
    except (OSError, RuntimeError, ValueError):    # a symlink loop, or a name the OS refuses
        return None, PATH_OUTSIDE_ROOT
    if not candidate.is_relative_to(real_root):
        return None, PATH_OUTSIDE_ROOT
    return regular_file(candidate)


def regular_file(path: Path) -> tuple[Path | None, str]:
    """`path` itself when it is a regular file within the size bound (no symlink check)."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None, FILE_NOT_FOUND
    if not stat.S_ISREG(info.st_mode):
        return None, FILE_NOT_FOUND
    if info.st_size > MAX_FILE_BYTES:
        return None, FILE_TOO_LARGE
    return path, OK


def refusal(status: str, name: str, root: Path, kind: str) -> str:
    """Why a file under a root could not be opened."""
    if status == PATH_OUTSIDE_ROOT:
        return f"path '{name}' leaves the {kind} root"
    if status == FILE_TOO_LARGE:
        return f"file '{name}' is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB: not read"
    return f"file '{name}' not found under {root}"

