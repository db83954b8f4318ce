"""Call logs and cache writes off the event loop: one thread takes them in the order they
were handed over and writes answers to the cache in batches, one transaction each.

At 64 calls in flight a profile of the citation judge found the loop blocked a third of
its time creating log files (the file system takes 20 us to 1 ms an inode) and a tenth
committing one cache transaction per answer. Nothing waits for this thread but the run's
end (`close`): writes overlap the wait for answers. What one turn of the event loop hands
over goes to the thread as one batch, at the end of that turn: a put per job woke the
thread for each (at 256 calls in flight, 4% of the loop's time). An answer handed over but
not yet committed is served from `pending`, so a call asked again in the same run still
finds it."""

from __future__ import annotations

import asyncio
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any

from runner.stores.json_cache import JsonCache

Job = Callable[[], object]
_STOP = object()
BATCH = 256              # answers per cache transaction, at most


class BackgroundWriter:
    def __init__(self) -> None:
        self.pending: dict[str, Any] = {}
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._turn: list[Any] = []           # handed over in this turn of the event loop, not yet sent
        self._failures: dict[str, str] = {}       # what failed -> its first error

    def submit(self, job: Job) -> None:
        self._hand_over(job)

    def cache_set(self, cache: JsonCache, key: str, value: Any) -> None:
        self.pending[key] = value
        self._hand_over((cache, key, value))

    def _hand_over(self, entry: Any) -> None:
        self._start()
        self._turn.append(entry)
        if len(self._turn) == 1:
            try:
                asyncio.get_running_loop().call_soon(self._send_turn)
            except RuntimeError:        # no event loop in this thread: at once
                self._send_turn()

    def _send_turn(self) -> None:
        if self._turn:
            turn, self._turn = self._turn, []
            self._queue.put(turn)

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="runner-writer", daemon=True)
            self._thread.start()

    def _work(self) -> None:
        while True:
            work = list(self._queue.get())
            while len(work) < BATCH:
                try:
                    work.extend(self._queue.get_nowait())
                except queue.Empty:
                    break
            answers: dict[JsonCache, list[tuple[str, Any]]] = {}
            stop = False
            for entry in work:
                if entry is _STOP:
                    stop = True
                elif isinstance(entry, tuple):
                    answers.setdefault(entry[0], []).append(entry[1:])
                else:
                    self._run(entry)
            for cache, pairs in answers.items():
                try:
                    cache.set_many(pairs)
                except Exception as exc:       # a full disk or a broken cache: the answers are still in results
                    self._failures.setdefault("cache", f"{type(exc).__name__}: {exc}")
                for key, _ in pairs:
                    self.pending.pop(key, None)
            if stop:
                return

    def _run(self, job: Job) -> None:
        try:
            job()
        except Exception as exc:               # debug output: a failed log never fails a call
            self._failures.setdefault("logs", f"{type(exc).__name__}: {exc}")

    def flush(self) -> None:
        """Wait until everything handed over so far is written."""
        if self._thread is None:
            return
        written = threading.Event()
        self._turn.append(written.set)
        self._send_turn()
        written.wait()

    def close(self) -> None:
        """Wait for everything handed over, then say once what could not be written."""
        if self._thread is None:
            return
        self._turn.append(_STOP)
        self._send_turn()
        self._thread.join()
        self._thread = None
        if "cache" in self._failures:
            sys.stderr.write(f"runner: some answers could not be written to the cache "
                             f"({self._failures['cache']}): a rerun asks for them again\n")
        if "logs" in self._failures:
            sys.stderr.write(f"runner: some call logs could not be written ({self._failures['logs']})\n")
