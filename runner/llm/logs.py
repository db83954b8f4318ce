"""Per-call logs: <out>/llm_logs/<model name>_<NNNN>_item<K>.txt, numbered per model in
item order then call order (stable across reruns, whatever order calls finished in); the
name says which item K the call belongs to, so the report links each vote to its log.

Each call is written as soon as it is logged, under a provisional name in
llm_logs/.pending/, so a killed run keeps its logs; the run's end gives them their
final numbers.

A cached call's log is written like any other, from the messages and the cached answer:
the exchange that produced the answer, byte for byte, as the key holds the messages and
the cache the answer. The report and the results say the call was cached. Nothing is
shared between runs or with the cache (issue 31, H8): every file belongs to the run that
wrote it, with that run's umask. Runner once kept a copy of each log beside the cache
(<cache>/call_logs, LOG_STORE) to copy into later runs; formatting costs less than the
second file each answer cost (an inode each, issue 26), so `cache clear` only removes what
older versions left there.

Only files named as runner names logs are ever removed, and no write follows a symlink."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from runner.fileio import open_own
from runner.safetext import utf8

PENDING = ".pending"
LOG_STORE = "call_logs"          # in the cache folder: logs kept by older versions (cache clear removes them)
LOG_NAME = re.compile(r".+_\d{4,}_item\d+\.txt")      # what finish() names a log; nothing else is removed
PENDING_NAME = re.compile(r"\d{8,}_\d{5,}_[^/\\\x00]+\.txt")


def format_messages(messages: list[dict[str, Any]]) -> str:
    if len(messages) == 1 and messages[0].get("role") == "user":
        return str(messages[0].get("content", ""))
    return "\n\n".join(f"[{m.get('role')}]\n{m.get('content', '')}" for m in messages)


def pending_name(item: int, seq: int, model: str) -> str:
    return f"{item:08d}_{seq:05d}_{model}.txt"


def log_body(prompt: str, response: str) -> bytes:
    return utf8(f"=== PROMPT ===\n{prompt}\n\n=== RESPONSE ===\n{response}\n")


class LogCollector:
    """A Ray worker's call logs, kept until its block's results go to the driver, which
    writes them into the run folder (a worker on another machine cannot)."""

    def __init__(self) -> None:
        self._logs: list[tuple[str, bytes]] = []

    def put(self, name: str, body: bytes) -> None:
        self._logs.append((name, body))

    def take(self) -> list[tuple[str, bytes]]:
        taken, self._logs = self._logs, []
        return taken

    def finish(self) -> None:
        return None


class CallLogWriter:
    def __init__(self, directory: Path):
        self.directory = directory
        self.pending = directory / PENDING
        if self.pending.is_symlink():                       # planted: removing a link leaves its target alone
            self.pending.unlink()
        shutil.rmtree(self.pending, ignore_errors=True)     # leftovers of a killed run
        self.pending.mkdir(parents=True, exist_ok=True)
        # Logs are made relative to the open folder: the kernel walks its path once, not per log.
        self._folder: int | None = os.open(self.pending, os.O_RDONLY | os.O_DIRECTORY)

    def put(self, name: str, body: bytes) -> None:
        """Write one call's log (made here, or by a Ray worker) under its provisional name."""
        if not PENDING_NAME.fullmatch(name):
            raise ValueError(f"not a provisional log name: {name[:80]!r}")
        # Debug output: one plain write, no fsync (results and the cache carry durability);
        # os-level calls, as a cached run writes hundreds of these in a fraction of a second.
        fd = open_own(name, dir_fd=self._folder)
        try:
            os.write(fd, body)
        finally:
            os.close(fd)

    def finish(self) -> None:
        """Replace the folder's logs with this run's (a rerun's numbering starts again at 0001)."""
        pending, self._folder = self._folder, None
        if pending is None:
            return
        try:
            self._rename(pending)
        finally:
            os.close(pending)
        shutil.rmtree(self.pending, ignore_errors=True)

    def _rename(self, pending: int) -> None:
        try:
            names = sorted(os.listdir(pending))           # names sort by (item, call)
        except OSError:
            return
        counters: dict[str, int] = {}
        moves = []
        for name in names:
            item, _, model = name.removesuffix(".txt").split("_", 2)
            counters[model] = counters.get(model, 0) + 1
            moves.append((name, f"{model}_{counters[model]:04d}_item{int(item)}.txt"))
        kept = {target for _, target in moves}
        for stale in os.scandir(self.directory):
            if stale.name not in kept and LOG_NAME.fullmatch(stale.name) and \
                    (stale.is_symlink() or stale.is_file(follow_symlinks=False)):
                os.unlink(stale.path)                           # the rest are replaced in place
        # Relative to the two open folders: the kernel walks neither path again for each log.
        folder = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for name, target in moves:
                os.replace(name, target, src_dir_fd=pending, dst_dir_fd=folder)
        finally:
            os.close(folder)
