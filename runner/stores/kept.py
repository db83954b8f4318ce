"""What makes a kept result, so that it is reused only where it still holds. A result kept for
later (the memo store, `runner serve`'s result store) carries the data files its item's steps
read (`read_table`, `read_lines`) with a digest of each, and is reused only while every file
holds what it held. A memo entry also carries the hash of what made it (Runtime.made_by, which
keys serve's store): one made by another pipeline, or without it, is not reused.

A kept result also carries each jury's valid votes (`note_votes`), so that a run reusing it
measures its jurors' agreement over it as the run that judged it did; a result carries them to
its run's recorder, which adds them to the agreement and keeps them in the run folder.

The notes live in a context variable set around each item (run_item), however nested or
concurrent its steps; a caller that set one first (serve's judging) gets them."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

READS_FIELD = "_read_files"      # in a kept result: {path: sha256 of its contents}
MADE_BY_FIELD = "_made_by"       # in a memo entry: the hash of what made it (Runtime.made_by)
ANSWERED_FIELD = "_answered"     # in a kept result: a model's (or the cache's) answer made it
VOTES_FIELD = "runner:votes"     # in a kept result: [[jury step, numeric, {seat: valid vote}], ...]
NOTES = (READS_FIELD, MADE_BY_FIELD, ANSWERED_FIELD, VOTES_FIELD)


@dataclass
class Notes:
    """What one item's steps noted as they ran: the data files read, and each jury's valid votes."""
    reads: dict[str, str] = field(default_factory=dict)
    votes: list[list[Any]] = field(default_factory=list)


_NOTES: ContextVar[Notes | None] = ContextVar("runner_item_notes", default=None)


def digest(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def note_read(path: Path, sha256: str) -> None:
    """The item running now read `path`, whose contents have this digest."""
    notes = _NOTES.get()
    if notes is not None:
        notes.reads[str(path)] = sha256


def note_votes(step: str, numeric: bool, votes: dict[str, Any]) -> None:
    """The item running now had jury `step` take these valid votes, by seat (`numeric`: a mean,
    median, min or max vote, whose agreement is measured apart)."""
    notes = _NOTES.get()
    if notes is not None:
        notes.votes.append([step, numeric, votes])


@contextmanager
def noting() -> Iterator[Notes]:
    """The notes of what runs inside (the caller's when one is being noted already)."""
    notes = _NOTES.get()
    if notes is not None:
        yield notes
        return
    notes = Notes()
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)


def kept(result: dict[str, Any], notes: Notes, made_by: str | None = None,
         answered: bool = False) -> dict[str, Any]:
    """A result as kept for later: with the files it read and its juries' votes, when it has any,
    what made it, and whether a model's answer did (a run reusing it counts that answer as the
    cache's)."""
    return {**without_reads(result), **({READS_FIELD: dict(notes.reads)} if notes.reads else {}),
            **({VOTES_FIELD: list(notes.votes)} if notes.votes else {}),
            **({MADE_BY_FIELD: made_by} if made_by is not None else {}),
            **({ANSWERED_FIELD: True} if answered else {})}


def answered_before(stored: dict[str, Any]) -> bool:
    """A kept result (as stored, with its notes) that a model's answer made."""
    return stored.get(ANSWERED_FIELD) is True


def reusable(stored: dict[str, Any], made_by: str | None = None) -> dict[str, Any] | None:
    """A kept result without its notes, or None when another pipeline made it (`made_by` given) or
    a file it read changed or is gone; its reads and votes are noted again for the item taking it."""
    if made_by is not None and stored.get(MADE_BY_FIELD) != made_by:
        return None
    reads = stored.get(READS_FIELD)
    if isinstance(reads, dict):
        try:
            if any(digest(Path(str(name)).read_bytes()) != sha256 for name, sha256 in reads.items()):
                return None
        except OSError:
            return None
        for name, sha256 in reads.items():
            note_read(Path(str(name)), str(sha256))
    for step, numeric, votes in valid_votes(stored.get(VOTES_FIELD)):
        note_votes(step, numeric, votes)
    return without_reads(stored)


def valid_votes(value: Any) -> list[list[Any]]:
    """The well-formed entries of a votes note as read from a file (a hand-edited one's odd entry is passed over)."""
    return [[vote[0], vote[1] is True, vote[2]] for vote in (value if isinstance(value, list) else ())
            if isinstance(vote, list) and len(vote) == 3 and isinstance(vote[0], str) and isinstance(vote[2], dict)]


def without_reads(result: dict[str, Any]) -> dict[str, Any]:
    """A kept result as shown: without the notes of what made it."""
    return {name: value for name, value in result.items() if name not in NOTES}
