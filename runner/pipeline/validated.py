"""Pipelines already found valid, kept in the cache folder, so a rerun skips the checks.

Checking a pipeline (its JSON Schema, every template and reference, its prompt and answer
schema files, and importing jsonschema to do it) is a large share of a fully cached run's
time (bench/RESULTS.md). A run or render whose
pipeline, after `--set`, is exactly one already found valid, with the same prompt and
schema files and the same runner, skips the checks. The fingerprint covers everything
they read: the data, which of its declared environment variables are set, the file's place
(which decides the prompts/ and schemas/ folders),
the content of every file in those folders, and runner itself (its version, and the size
and time of each of its own files, so an edited checkout checks again). `runner validate`
always checks. A marker is a file named by the fingerprint holding an HMAC of it under a
secret key of this cache (`validated.key`, 0600, made on first use), so a marker written by
anyone without the key (an empty file named by a predictable hash) is not believed; a key
file that is not this user's alone is not used. Anything that goes wrong reading or
writing either only means the checks run."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
from functools import lru_cache
from pathlib import Path
from typing import Any

from runner import __version__
from runner.pipeline.files import sha256_of

FOLDER = "validated"
KEY_FILE = "validated.key"
KEY_BYTES = 32


def _files(root: str, skip: str = "") -> list[os.DirEntry[str]]:
    """Every entry below root that is not a folder (links not followed into folders, folders
    named `skip` left out), in a stable order."""
    found: list[os.DirEntry[str]] = []
    pending = [root]
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != skip:
                        pending.append(entry.path)
                else:
                    found.append(entry)
            except OSError:
                continue
    return sorted(found, key=lambda entry: entry.path)


def _contents(root: str) -> list[tuple[str, str]]:
    """(path, sha256) of every file below root: a prompt edited twice within the file
    system's clock tick, to the same size, still differs. Only regular files are read (a
    FIFO would block); anything else counts by its name."""
    hashed = []
    for entry in _files(root):
        try:
            if not entry.is_file():
                hashed.append((entry.path, "not a regular file"))
                continue
            with open(entry.path, "rb") as handle:
                hashed.append((entry.path, hashlib.sha256(handle.read()).hexdigest()))
        except OSError:
            hashed.append((entry.path, "unreadable"))
    return hashed


@lru_cache(maxsize=1)
def _runner_stamp() -> str:
    """runner's version and each of its files' size and time (an edited checkout differs)."""
    stats: list[tuple[str, int, int]] = []
    for entry in _files(str(Path(__file__).resolve().parent), skip="__pycache__"):
        try:
            info = entry.stat()
        except OSError:
            continue
        stats.append((entry.path, info.st_size, info.st_mtime_ns))
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
        return hmac.compare_digest(held, _seal(key, fingerprint))

    def remember(self, fingerprint: str) -> None:
        key = self._key(create=True)
        if key is None:
            return
        temporary = self.folder / f".{fingerprint}.{os.getpid()}.{os.urandom(4).hex()}"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            temporary.write_bytes(_seal(key, fingerprint))
            os.replace(temporary, self.folder / fingerprint)
        except OSError:
            temporary.unlink(missing_ok=True)

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


def _seal(key: bytes, fingerprint: str) -> bytes:
    return hmac.new(key, fingerprint.encode("ascii", "replace"), hashlib.sha256).hexdigest().encode("ascii")
