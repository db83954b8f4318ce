"""Per-call logs: <out>/llm_logs/<model name>_<NNNN>_item<K>.txt, numbered per model in
item order then call order (stable across reruns, whatever order calls finished in); the
name says which item K the call belongs to, so the report links each vote to its log.

Each call is written as soon as it is logged, under a provisional name in
llm_logs/.pending/, so a killed run keeps its logs; the run's end gives them their
final numbers. A run writes its first SPOOL_AFTER logs itself, then hands the rest to a
process of their own (log_process.py), which also names them all at the end.

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

import asyncio
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from runner.llm.log_files import rename_logs, write_pending
from runner.llm.log_process import LogProcess, LogProcessUnavailable
from runner.safetext import utf8

PENDING = ".pending"
LOG_STORE = "call_logs"          # in the cache folder: logs kept by older versions (cache clear removes them)
SPOOL_AFTER = 256        # logs a run writes itself before a process of their own takes the rest


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
        self._spool: LogProcess | None = None
        self._spool_failed = False
        self._written = 0

    def put(self, name: str, body: bytes) -> None:
        """Write one call's log (made here, or by a Ray worker) under its provisional name."""
        if self._folder is None:
            raise ValueError("the run's call logs are finished")
        write_pending(self._folder, name, body)

    def spooled(self, name: str, body: bytes) -> bool:
        """Hand the log to the log process (started once this run wrote SPOOL_AFTER logs
        here); False when it is to be written here. On the event loop's thread only."""
        if self._spool is None:
            self._written += 1
            if self._written <= SPOOL_AFTER or self._spool_failed or self._folder is None:
                return False
            try:
                self._spool = LogProcess(self._folder, self._directory_fd())
            except LogProcessUnavailable:
                self._spool_failed = True
                return False
        return self._spool.send(name, body)

    def _directory_fd(self) -> int:
        if self._final is None:
            self._final = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        return self._final

    def end(self) -> asyncio.Task[None] | None:
        """Give this run's logs their final names: here, at once (None), or by the log process,
        which is told now and awaited with the task returned (the caller may work meanwhile)."""
        spool, self._spool = self._spool, None
        if spool is None:
            self.finish()
            return None
        spool.end()
        return asyncio.get_running_loop().create_task(self._named_by(spool))

    async def _named_by(self, spool: LogProcess) -> None:
        code = await spool.ended()
        if code != 0:                           # what it left is named here
            sys.stderr.write(f"runner: the log process ended (exit code {code}): some call logs may be missing\n")
        self._release(rename=code != 0)

    def finish(self) -> None:
        """Replace the folder's logs with this run's (a rerun's numbering starts again at 0001)."""
        self._release(rename=True)

    def _release(self, rename: bool) -> None:
        if self._folder is None:
            return
        try:
            if rename:
                rename_logs(self._folder, self._directory_fd())
        finally:
            self._close_folders()
        shutil.rmtree(self.pending, ignore_errors=True)

    def _close_folders(self) -> None:
        for folder in (self._folder, self._final):
            if folder is not None:
                os.close(folder)
        self._folder = self._final = None
