"""Pipelines already found valid, kept in the cache folder, so a rerun skips the checks.

Checking a pipeline (its JSON Schema, every template and reference, its prompt and answer
schema files) is a large share of a fully cached run: importing jsonschema alone takes
about 65 ms, against about 0.5 s for the whole rerun of 200 citations. A run or render whose
pipeline, after `--set`, is exactly one already found valid, with the same prompt and
schema files and the same runner, skips the checks. The fingerprint covers everything
they read: the data, the file's place (which decides the prompts/ and schemas/ folders),
the content of every file in those folders, and runner itself (its version, and the size
and time of each of its own files, so an edited checkout checks again). `runner validate`
always checks. A marker is an empty file named by the fingerprint; anything that goes
wrong reading or writing one only means the checks run."""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from runner import __version__

FOLDER = "validated"


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

    @staticmethod
    def fingerprint(data: Any, file: Path, project_dir: Path) -> str:
        payload = [_runner_stamp(), str(file.resolve()), str(project_dir),
                   _contents(str(project_dir / "prompts")), _contents(str(project_dir / "schemas")), data]
        text = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=repr)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def known(self, fingerprint: str) -> bool:
        return (self.folder / fingerprint).is_file()

    def remember(self, fingerprint: str) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            (self.folder / fingerprint).touch()
        except OSError:
            pass
