"""Call logs and cache writes, kept out of the event loop's way.

Answers go to the cache on the loop's own thread, many to a transaction: those that come
within COMMIT_EVERY of the first one waiting are committed together then (at once when
COMMIT_AT are waiting, and at `flush` and `close`). Committed at the end of each turn of
the loop instead, a cold citation judge's 3,600 answers took 590-1,190 transactions and
150-230 ms; now 42-93 transactions and 89-122 ms (in-run timers, 64 and 256 calls in
flight). A run killed outright (SIGKILL) loses at most the last COMMIT_EVERY of answers
from the cache (its results keep them), which a rerun asks for again. An answer handed
over is served from `pending` until it is committed, so a call asked again in the same run
finds it.

An answer whose cache is another process's (`aset`: a Ray worker on another machine) is
awaited there before its item goes on, one by one: a block Ray runs again after that
machine was lost then repeats only the calls that were in flight, never one that was
answered. A worker on the driver's machine commits as a run does, and at the end of each
block: one that dies alone (its node lives on) may have its last COMMIT_EVERY of answers
asked again.

A call's log is formatted where it is made, and its file (one of the first SPOOL_AFTER of a
run; the rest go to the log process, logs.py) written at once while the file system is
quick; once most of the last WINDOW files took longer than SLOW_WRITE each, files go to one
thread that writes them in the order they came, and the loop no longer waits for
them. Nothing waits for that thread but the run's end (`close`). Most of a window, not an
average: with the server on the same cores, the scheduler now and then pauses this process
in the middle of a write for a few milliseconds, and one such pause moved an average past
SLOW_WRITE, and the files to the thread, in one cold run in four at 256 calls in flight.

Why not a thread for everything: every call the thread makes (SQLite's, the file's) hands
the interpreter lock back and forth with the loop. With the cache and the logs written by
a thread, a cold citation judge at 256 calls in flight (3,600 calls) made 73,000 futex
calls; with the cache on the loop, 35,000; with the files written at once too (13 us a file
on tmpfs, about 25 us on a quiet disk), the thread is not started and the run takes 13%
less CPU. A file system that takes 400 us a file (this VM's ext4 for minutes after many
files were removed) moves the files to the thread after a few."""

from __future__ import annotations

import asyncio
import queue
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from runner.llm.log_files import LOGS_UNWRITTEN
from runner.stores.json_cache import JsonCache

Job = Callable[[], object]
_STOP = object()
SLOW_WRITE = 150e-6     # seconds a quick file system takes, at most, to write a file
WINDOW = 16             # the last writes judged together: files go to the thread when most of them were slow
COMMIT_EVERY = 0.05     # seconds the first answer waiting may wait to be committed
COMMIT_AT = 512         # answers waiting that are committed at once


class SharedCache(Protocol):
    async def aset(self, key: str, value: Any) -> None: ...


class BackgroundWriter:
    def __init__(self) -> None:
        self.pending: dict[str, Any] = {}
        self._answers: dict[JsonCache, list[tuple[str, Any]]] = {}     # not yet committed (also in pending)
        self._commit_timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        self._files: list[Any] = []                                    # this turn's, not yet handed to the thread
        self._turn_ends = False
        self._queue: queue.SimpleQueue[list[Any]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._failures: dict[str, str] = {}       # what failed -> its first error
        self._recent: deque[bool] = deque(maxlen=WINDOW)    # whether each of the last writes here was slow

    def submit(self, job: Job) -> None:
        """A file to write (a call's log): here while files are quick to write, else by the thread."""
        if self._thread is None and sum(self._recent) * 2 <= WINDOW:
            started = time.perf_counter()
            self._run(job)
            self._recent.append(time.perf_counter() - started > SLOW_WRITE)
            return
        self._files.append(job)
        self._end_turn_soon()

    def _run(self, job: Job) -> None:
        try:
            job()
        except Exception as exc:               # debug output: a failed log never fails a call
            self._failures.setdefault("logs", f"{type(exc).__name__}: {exc}")

    def cache_set(self, cache: JsonCache, key: str, value: Any) -> None:
        self.pending[key] = value
        self._answers.setdefault(cache, []).append((key, value))
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:            # no event loop in this thread: at once
            self._commit()
            return
        if len(self.pending) >= COMMIT_AT:
            self._commit()
        elif self._commit_timer is None or self._timer_loop is not loop:   # a loop that ended never fires its timer
            if self._commit_timer is not None:
                self._commit_timer.cancel()
            self._commit_timer, self._timer_loop = loop.call_later(COMMIT_EVERY, self._commit), loop

    async def cache_set_shared(self, cache: SharedCache, key: str, value: Any) -> None:
        """An answer for a cache another process owns, there before the caller goes on."""
        try:
            await cache.aset(key, value)
        except Exception as exc:       # the owner is gone: the answer is still in results
            self._failures.setdefault("cache", f"{type(exc).__name__}: {exc}")

    def _end_turn_soon(self) -> None:
        if self._turn_ends:
            return
        self._turn_ends = True
        try:
            asyncio.get_running_loop().call_soon(self._end_turn)
        except RuntimeError:        # no event loop in this thread: at once
            self._end_turn()

    def _commit(self) -> None:
        if self._commit_timer is not None:
            self._commit_timer.cancel()
            self._commit_timer = None
        answers, self._answers = self._answers, {}
        for cache, pairs in answers.items():
            try:
                cache.set_many(pairs)
            except Exception as exc:       # a full disk or a broken cache: the answers are still in results
                self._failures.setdefault("cache", f"{type(exc).__name__}: {exc}")
            for key, _ in pairs:
                self.pending.pop(key, None)

    def _end_turn(self) -> None:
        self._turn_ends = False
        if self._files:
            files, self._files = self._files, []
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="runner-writer", daemon=True)
                self._thread.start()
            self._queue.put(files)

    def _work(self) -> None:
        while True:
            for job in self._queue.get():
                if job is _STOP:
                    return
                self._run(job)

    def flush(self) -> None:
        """Wait until everything handed over so far is written."""
        self._commit()
        self._end_turn()
        if self._thread is None:
            return
        written = threading.Event()
        self._queue.put([written.set])
        written.wait()

    def close(self) -> None:
        """Write everything handed over, then say once what could not be written."""
        self._commit()
        self._end_turn()
        if self._thread is not None:
            self._queue.put([_STOP])
            self._thread.join()
            self._thread = None
        if "cache" in self._failures:
            sys.stderr.write(f"runner: some answers could not be written to the cache "
                             f"({self._failures['cache']}): a rerun asks for them again\n")
        if "logs" in self._failures:
            sys.stderr.write(LOGS_UNWRITTEN.format(self._failures["logs"]))
