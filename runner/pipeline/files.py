"""The files a pipeline is made of: the one named on the command line, the bases it
`extends:`, the parts its `pipeline` steps run and the plugin modules it names. Each is read
the same way (a regular file, UTF-8 with or without a BOM, safe YAML with positions), and a
file one of them names is found relative to the file that names it and must stay inside the
project (the folder holding pipelines/, prompts/ and schemas/)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from runner.errors import RunnerError
from runner.fileio import atomic_write
from runner.paths import FILE_TOO_LARGE, OK, regular_file
from runner.yamlpos import Located, load_located

# The name of a pipeline `runner init` or `runner import` writes (pipelines/NAME.yaml).
PIPELINE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def display(file: Path) -> str:
    """The file as messages name it: relative to the working directory where it can be."""
    try:
        return str(file.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(file)


def read_located(file: Path, what: str = "pipeline file") -> Located:
    """The file's YAML with positions, or RunnerError saying why it cannot be read."""
    shown = display(file)
    status = regular_file(file)[1]
    if status != OK:
        reason = ("is larger than 64 MB" if status == FILE_TOO_LARGE
                  else "is not a regular file" if file.exists() else "not found")
        raise RunnerError(f"{shown}: {what} {reason}")
    try:
        text = file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise RunnerError(f"{shown}: cannot read {what}: {exc}") from None
    return load_located(text, shown)


def named_file(owner: Path, name: str, project_dir: Path) -> tuple[Path | None, str]:
    """The file `name` (relative to the folder of `owner`, the file naming it), or why not:
    it must exist as a regular file inside the project, after every symlink."""
    if not name or "\x00" in name or Path(name).is_absolute():
        return None, f"'{name}' must be a path relative to {display(owner)}"
    try:
        found = (owner.resolve().parent / name).resolve()
        root = project_dir.resolve()
    except (OSError, RuntimeError, ValueError):
        return None, f"'{name}' cannot be resolved"
    if not found.is_relative_to(root):
        return None, f"'{name}' leaves the project ({display(root)})"
    if regular_file(found)[1] != OK:
        return None, f"'{name}' not found ({display(found)})"
    return found, ""


def write_new_files(root: Path, files: dict[str, str], command: str, choice: str) -> None:
    """Write `files` (project-relative path -> text) under `root`, as `runner init` and `runner
    import` do; refuse, naming the first that exists, before writing any."""
    taken = [relative for relative in files if (root / relative).exists()]
    if taken:
        raise RunnerError(f"{taken[0]} already exists: {command} writes no file over another (choose another "
                          f"{choice}, or move it)")
    for relative, text in files.items():
        atomic_write(root / relative, text)


def sha256_of(file: Path) -> str:
    """The file's content hash ('unreadable' when it cannot be read)."""
    try:
        return hashlib.sha256(file.read_bytes()).hexdigest()
    except OSError:
        return "unreadable"
