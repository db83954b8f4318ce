"""Pipelines already found valid, kept in the cache folder, so a rerun skips the checks.

Checking (the JSON Schema, every template and reference, the prompt and answer schema files,
importing jsonschema) is a large share of a fully cached run's time. `runner validate` always
checks; a run or render skips it when its fingerprint is known. The fingerprint covers all the
checks read: the data after `--set`, which declared environment variables are set, the file's
place (which decides prompts/ and schemas/), every file in those folders, and runner itself
(its version, each of its files' size and time). A marker is a file named by the fingerprint
holding its HMAC under this cache's secret (`validated.key`, 0600, made on first use, used only
when it is this user's alone), so a marker anyone could write is not believed. Anything that
goes wrong reading or writing either only means the checks run."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import stat
from functools import lru_cache
from pathlib import Path
from typing import Any

from runner import __version__
from runner.fileio import OutputError, atomic_write
from runner.pipeline.files import sha256_of

FOLDER = "validated"
KEY_FILE = "validated.key"
KEY_BYTES = 32


def _files(root: str, skip: str = "") -> list[str]:
    """Every path below root that is not a folder (a link to one counts, not followed; folders
    named `skip` left out), in a stable order."""
    found: list[str] = []
    for folder, folders, files in os.walk(root):
        found += [os.path.join(folder, name) for name in files]
        found += [os.path.join(folder, name) for name in folders if os.path.islink(os.path.join(folder, name))]
        folders[:] = [name for name in folders if name != skip]
    return sorted(found)


def _contents(root: str) -> list[tuple[str, str]]:
    """(path, sha256) of every file below root: a prompt edited twice within the file system's
    clock tick, to the same size, still differs. Only regular files are read (a FIFO would
    block); anything else counts by its name."""
    return [(path, sha256_of(Path(path)) if os.path.isfile(path) else "not a regular file") for path in _files(root)]


@lru_cache(maxsize=1)
def _runner_stamp() -> str:
    """runner's version and the size and time of each file of the whole package (an edited
    checkout differs): what a pipeline's check depends on lives in checks/, templating/,
    inputs/, engine/steps/ and schemas/ as well as here."""
    stats: list[tuple[str, int, int]] = []
    for path in _files(str(Path(__file__).resolve().parent.parent), skip="__pycache__"):
        try:
            info = os.stat(path)
        except OSError:
            continue
        stats.append((path, info.st_size, info.st_mtime_ns))
    return hashlib.sha256(json.dumps([__version__, stats]).encode()).hexdigest()


class ValidatedPipelines:
    def __init__(self, cache_dir: Path):
        self.folder = cache_dir / FOLDER
        self.key_file = cache_dir / KEY_FILE

    @staticmethod
    def fingerprint(data: Any, file: Path, project_dir: Path, sources: list[Path] | None = None) -> str:
        """`sources`: the other files the pipeline is made of (bases, parts, plugin files). Also
        which declared environment variables are set (their names, never their values): a
        variable a model needs must be checked again when it comes or goes."""
        declared = data.get("env") if isinstance(data, dict) else None
        names = declared if isinstance(declared, list) else []
        present = sorted(str(name) for name in names if str(name) in os.environ)
        payload = [_runner_stamp(), str(file.resolve()), str(project_dir),
                   _contents(str(project_dir / "prompts")), _contents(str(project_dir / "schemas")), data, present,
                   [(str(path), sha256_of(path)) for path in sources or []]]
        text = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=repr)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def known(self, fingerprint: str) -> bool:
        key = self._key(create=False)
        if key is None:
            return False
        try:
            with open(self.folder / fingerprint, "rb") as handle:
                held = handle.read(256)
        except OSError:
            return False
        return hmac.compare_digest(held, _seal(key, fingerprint).encode("ascii"))

    def remember(self, fingerprint: str) -> None:
        key = self._key(create=True)
        if key is None:
            return
        with contextlib.suppress(OutputError):
            atomic_write(self.folder / fingerprint, _seal(key, fingerprint))

    def _key(self, create: bool) -> bytes | None:
        """This cache's secret; None when it is missing (and not to be made), unreadable, or
        readable or writable by anyone else (then anyone could have written it)."""
        if create:
            try:
                self.key_file.parent.mkdir(parents=True, exist_ok=True)
                descriptor = os.open(self.key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            except FileExistsError:
                pass
            except OSError:
                return None
            else:
                with os.fdopen(descriptor, "wb") as handle:
                    handle.write(os.urandom(KEY_BYTES))
        try:
            descriptor = os.open(self.key_file, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        with os.fdopen(descriptor, "rb") as handle:
            info = os.fstat(handle.fileno())
            key = handle.read(KEY_BYTES + 1)
        private = stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077
        return key if private and len(key) == KEY_BYTES else None


def _seal(key: bytes, fingerprint: str) -> str:
    return hmac.new(key, fingerprint.encode("ascii", "replace"), hashlib.sha256).hexdigest()
