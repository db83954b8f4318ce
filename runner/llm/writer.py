"""What a run writes as its calls answer: cache entries, many to a transaction, and call
logs, written at once.

Answers go to the cache on the event loop's thread, committed together once the first one
waiting has waited COMMIT_EVERY (at once when COMMIT_AT are waiting, and at `flush` and
`close`): one SQLite transaction for many answers, not one each. A run killed outright
(SIGKILL) loses at most the last COMMIT_EVERY of answers from the cache (its results keep
them), which a rerun asks for again. An answer handed over is served from `pending` until
it is committed, so a call asked again in the same run finds it.

An answer whose cache is another process's (`aset`: a Ray worker on another machine) is
awaited there before its item goes on, one by one: a block Ray runs again after that
machine was lost then repeats only the calls that were in flight, never one that was
answered.

Nothing written here fails a call: what could not be written is said once, at `close`."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any, Protocol

from runner.llm.log_files import LOGS_UNWRITTEN
from runner.stores.json_cache import JsonCache

COMMIT_EVERY = 0.05     # seconds the first answer waiting may wait to be committed
COMMIT_AT = 512         # answers waiting that are committed at once


class SharedCache(Protocol):
    async def aset(self, key: str, value: Any) -> None: ...


class Writer:
    def __init__(self) -> None:
        self.pending: dict[str, Any] = {}
        self._answers: dict[JsonCache, list[tuple[str, Any]]] = {}     # not yet committed (also in pending)
        self._commit_timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        self._failures: dict[str, str] = {}       # what failed -> its first error

    def write_log(self, write: Callable[[], object]) -> None:
        """Write a call's log now; a failure is said at `close` (a log never fails a call)."""
        try:
            write()
        except Exception as exc:
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

    def flush(self) -> None:
        """Commit every answer handed over so far."""
        self._commit()

    def close(self) -> None:
        """Commit everything handed over, then say once what could not be written."""
        self._commit()
        if "cache" in self._failures:
            sys.stderr.write(f"runner: some answers could not be written to the cache "
                             f"({self._failures['cache']}): a rerun asks for them again\n")
        if "logs" in self._failures:
            sys.stderr.write(LOGS_UNWRITTEN.format(self._failures["logs"]))
