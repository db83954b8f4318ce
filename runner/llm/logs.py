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
second file each answer would cost, so `cache clear` only removes what
older versions left there.

Only files named as runner names logs are ever removed, and no write follows a symlink."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from runner.llm.log_files import rename_logs, write_pending
from runner.safetext import utf8

PENDING = ".pending"
LOG_STORE = "call_logs"          # in the cache folder: logs kept by older versions (cache clear removes them)


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
        self._final: int | None = None           # llm_logs itself, opened when first needed

    def put(self, name: str, body: bytes) -> None:
        """Write one call's log (made here, or by a Ray worker) under its provisional name."""
        if self._folder is None:
            raise ValueError("the run's call logs are finished")
        write_pending(self._folder, name, body)

    def _directory_fd(self) -> int:
        if self._final is None:
            self._final = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        return self._final

    def finish(self) -> None:
        """Replace the folder's logs with this run's (a rerun's numbering starts again at 0001)."""
        if self._folder is None:
            return
        try:
            rename_logs(self._folder, self._directory_fd())
        finally:
            self._close_folders()
        shutil.rmtree(self.pending, ignore_errors=True)

    def _close_folders(self) -> None:
        for folder in (self._folder, self._final):
            if folder is not None:
                os.close(folder)
        self._folder = self._final = None
