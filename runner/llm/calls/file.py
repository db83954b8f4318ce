"""calls.jsonl on disk: appended in batches by the run (CallsFile) or kept for the driver by a
Ray worker (KeptCalls), and read back a line at a time, whole or by item, in flat memory."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

from runner.fileio import MAX_LINE_BYTES, AppendFile
from runner.llm.calls.record import item_of


class CallsFile:
    """A run's calls.jsonl: made (or emptied of an earlier run's) when the first lines come."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: AppendFile | None = None

    def append(self, lines: list[bytes]) -> None:
        if self._file is None:
            self._file = AppendFile(self.path)
        self._file.write(b"".join(lines))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


class KeptCalls:
    """A Ray worker's lines, kept until its block's report takes them to the driver's calls.jsonl."""

    def __init__(self) -> None:
        self._lines: list[bytes] = []

    def append(self, lines: list[bytes]) -> None:
        self._lines += lines

    def take(self) -> list[bytes]:
        taken, self._lines = self._lines, []
        return taken

    def close(self) -> None:
        return None


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(offset, line) of each complete line; a line past MAX_LINE_BYTES is skipped, and so is
    a last line without its newline (a killed run's, cut short)."""
    try:
        handle = path.open("rb")
    except OSError:
        return
    with handle:
        offset = 0          # counted, not asked: tell() is a system call a line
        while line := handle.readline(MAX_LINE_BYTES + 1):
            if line.endswith(b"\n"):
                yield offset, line
            else:
                while line and not line.endswith(b"\n"):      # the rest of a line too long to read
                    offset += len(line)
                    line = handle.readline(MAX_LINE_BYTES + 1)
            offset += len(line)


def _parsed(line: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def read_calls(path: Path, items: set[int] | None = None, model: str | None = None) -> Iterator[dict[str, Any]]:
    """The calls of calls.jsonl in file order, of `items` and of the model named `model` (under
    `models:`) when given; a line cut short (a killed run's last) is skipped."""
    for _, line in _lines(path):
        if items is not None and item_of(line) not in items:
            continue
        record = _parsed(line)
        if record is not None and (model is None or record.get("model") == model):
            yield record


def call_spans(path: Path) -> Iterator[tuple[int, int, int]]:
    """(item, offset, length) of every call's line, for an index of the file."""
    for offset, line in _lines(path):
        item = item_of(line)
        if item is not None:
            yield item, offset, len(line)


def read_spans(path: Path, spans: Iterable[tuple[int, int]]) -> list[dict[str, Any]]:
    """The calls at these (offset, length) spans of calls.jsonl (from call_spans)."""
    found = []
    with suppress(OSError), path.open("rb") as handle:
        for offset, length in spans:
            handle.seek(offset)
            record = _parsed(handle.read(min(length, MAX_LINE_BYTES)))
            if record is not None:
                found.append(record)
    return found
