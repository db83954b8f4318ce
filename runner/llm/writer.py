"""What a run writes as its calls end: cache entries, many to one SQLite transaction, and
lines of calls.jsonl, many to one write.

Both wait in memory up to FLUSH_EVERY, or until FLUSH_AT wait (and at `flush` and `close`): a
run killed outright loses at most that much, whose answers are in its results and asked again
by a rerun. An answer handed over is served from `pending` until it is committed, so a call
asked again finds it (across the runs of a long-lived process too: llm/shared_client.py).

An answer for another process's cache (`aset`: a Ray worker on another machine) is awaited
there before its item goes on, so a block Ray runs again repeats only the calls that were in
flight. Nothing written here fails a call: what could not be written is said once, at `close`."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from runner.llm.cache.store import JsonCache
from runner.llm.calls.file import CallsFile, KeptCalls

FLUSH_EVERY = 0.05      # seconds the first thing waiting may wait to be written
FLUSH_AT = 512          # things waiting that are written at once


class Writer:
    def __init__(self, calls: CallsFile | KeptCalls | None = None) -> None:
        """`calls`: where the lines of calls.jsonl go: the run's file, or a Ray worker's report."""
        self.pending: dict[str, Any] = {}
        self.calls = calls
        self._answers: dict[JsonCache, list[tuple[str, Any]]] = {}     # not yet committed (also in pending)
        self._lines: list[bytes] = []
        self._timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        self._failures: dict[str, str] = {}       # what failed -> its first error

    def cache_set(self, cache: JsonCache, key: str, value: Any) -> None:
        self.pending[key] = value
        self._answers.setdefault(cache, []).append((key, value))
        self._wait()

    def add_calls(self, lines: list[bytes]) -> None:
        """Lines of calls.jsonl (ignored when the run keeps no calls)."""
        if self.calls is not None:
            self._lines += lines
            self._wait()

    def _wait(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:            # no event loop in this thread: at once
            self.flush()
            return
        if len(self.pending) + len(self._lines) >= FLUSH_AT:
            self.flush()
        elif self._timer is None or self._timer_loop is not loop:   # a loop that ended never fires its timer
            if self._timer is not None:
                self._timer.cancel()
            self._timer, self._timer_loop = loop.call_later(FLUSH_EVERY, self.flush), loop

    async def cache_set_shared(self, cache: Any, key: str, value: Any) -> None:
        """An answer for a cache another process owns (`aset`), there before the caller goes on."""
        try:
            await cache.aset(key, value)
        except Exception as exc:       # the owner is gone: the answer is still in results
            self._failures.setdefault("cache", f"{type(exc).__name__}: {exc}")

    def flush(self) -> None:
        """Write everything handed over so far."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        answers, self._answers = self._answers, {}
        for cache, pairs in answers.items():
            try:
                cache.set_many(pairs)
            except Exception as exc:       # a full disk or a broken cache: the answers are still in results
                self._failures.setdefault("cache", f"{type(exc).__name__}: {exc}")
            for key, _ in pairs:
                self.pending.pop(key, None)
        lines, self._lines = self._lines, []
        if lines and self.calls is not None:
            try:
                self.calls.append(lines)
            except Exception as exc:       # debug output: the results hold every answer
                self._failures.setdefault("calls", f"{type(exc).__name__}: {exc}")

    def close(self) -> None:
        """Write everything handed over, then say once what could not be written."""
        self.flush()
        if self.calls is not None:
            try:
                self.calls.close()
            except OSError as exc:
                self._failures.setdefault("calls", f"{type(exc).__name__}: {exc}")
        if "cache" in self._failures:
            sys.stderr.write(f"runner: some answers could not be written to the cache "
                             f"({self._failures['cache']}): a rerun asks for them again\n")
        if "calls" in self._failures:
            sys.stderr.write(f"runner: some calls could not be written to calls.jsonl ({self._failures['calls']})\n")
