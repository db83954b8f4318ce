"""Per-model limits: concurrency, requests per minute, and a daily budget kept on disk."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from datetime import date
from pathlib import Path

from runner.llm.client.capacity import AdaptiveLimit

RATE_WINDOW_SECONDS = 60.0
# The server counts arrivals, not our starts: a request that first opens a connection
# arrives later than one reusing a kept-alive one, so starts are spaced a little wider.
RATE_MARGIN = 0.05


class BudgetSpent(Exception):
    pass


class RateWindow:
    """At most `per_minute` request starts in any 60-second window."""

    def __init__(self, per_minute: int):
        self.per_minute = per_minute
        self.window = RATE_WINDOW_SECONDS * (1 + RATE_MARGIN)
        self.starts: deque[float] = deque()
        self._lock = asyncio.Lock()

    async def wait(self) -> None:
        async with self._lock:
            while True:
                now = time.monotonic()
                while self.starts and now - self.starts[0] >= self.window:
                    self.starts.popleft()
                if len(self.starts) < self.per_minute:
                    self.starts.append(now)
                    return
                await asyncio.sleep(self.window - (now - self.starts[0]) + 0.001)


class DailyBudget:
    """Requests per day for one model, counted across runs in the cache folder."""

    def __init__(self, directory: Path):
        import diskcache
        self._store = diskcache.Cache(str(directory / "budgets"), eviction_policy="none")

    def spend(self, model_key: str, limit: int, shown: str) -> None:
        """Count one request, or raise BudgetSpent when today's budget is gone."""
        key = f"{model_key}|{date.today().isoformat()}"
        with self._store.transact():
            used = int(self._store.get(key, 0))
            if used >= limit:
                raise BudgetSpent(f"daily request budget of {limit} spent for {shown}")
            self._store.set(key, used + 1, expire=2 * 86400)

    def close(self) -> None:
        self._store.close()


class ModelGate:
    """The concurrency and rate limits of one model (the semaphore may be shared by the
    models of one local endpoint)."""

    def __init__(self, semaphore: asyncio.Semaphore | AdaptiveLimit | None, per_minute: int | None):
        self.semaphore = semaphore
        self.rate = RateWindow(per_minute) if per_minute else None

    async def __aenter__(self) -> None:
        if self.semaphore:
            await self.semaphore.acquire()

    async def pace(self) -> None:
        """Wait for the rate window; called last, right before the request is sent."""
        if self.rate:
            await self.rate.wait()

    async def __aexit__(self, *exc: object) -> None:
        if self.semaphore:
            self.semaphore.release()
