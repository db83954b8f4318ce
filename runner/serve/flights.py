"""One computation per key however many ask at once: identical in-flight requests (the same
pipeline hash and item key) make one set of LLM calls, not two."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class SingleFlight(Generic[T]):
    def __init__(self) -> None:
        self._running: dict[Hashable, asyncio.Task[T]] = {}

    async def run(self, key: Hashable, compute: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """The value, and whether another caller's computation gave it. The first caller owns the
        computation (cancelling it cancels the computation); a caller who joined it computes the
        value itself when the owner was cancelled."""
        while True:
            task = self._running.get(key)
            if task is None:
                task = asyncio.ensure_future(compute())
                self._running[key] = task
                task.add_done_callback(functools.partial(self._done, key))
                return await task, False
            try:
                return await asyncio.shield(task), True
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is None or current.cancelling():
                    raise
                self._done(key, task)         # the owner was cancelled: the next turn computes it here

    def _done(self, key: Hashable, task: asyncio.Task[T]) -> None:
        if self._running.get(key) is task and task.done():
            del self._running[key]

    def __len__(self) -> int:
        return len(self._running)
