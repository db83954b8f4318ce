"""Files a pipeline opens stay inside their declared root: no `..`, no absolute path,
no symlink escape. The statuses are part of the read_lines contract."""

from __future__ import annotations

from pathlib import Path, PurePosixPath, PureWindowsPath

OK, FILE_NOT_FOUND, LINES_NOT_FOUND, PATH_OUTSIDE_ROOT = "OK", "FILE_NOT_FOUND", "LINES_NOT_FOUND", "PATH_OUTSIDE_ROOT"


def resolve_inside(root: Path, name: str) -> tuple[Path | None, str]:
    """The real path of `name` under `root`, or the status saying why not."""
    if not name or PurePosixPath(name).is_absolute() or PureWindowsPath(name).is_absolute() \
            or ".." in PurePosixPath(name.replace("\\", "/")).parts:
        return None, PATH_OUTSIDE_ROOT
    real_root = root.resolve()
    candidate = (real_root / name).resolve()
    if not candidate.is_relative_to(real_root):
        return None, PATH_OUTSIDE_ROOT
    if not candidate.is_file():
        return None, FILE_NOT_FOUND
    return candidate, OK


def refusal(status: str, name: str, root: Path, kind: str) -> str:
    """Why a file under a root could not be opened."""
    if status == PATH_OUTSIDE_ROOT:
        return f"path '{name}' leaves the {kind} root"
    return f"file '{name}' not found under {root}"
