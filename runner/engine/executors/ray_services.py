"""What Ray workers share through the driver's node: the LLM cache and the models' limits.

Both are actors placed on the driver's node. A worker on that node opens the driver's
diskcache itself (diskcache is safe across processes; no round trip); a worker on another
machine cannot see that disk and asks the cache actor (`RemoteCache`). Limits are one
actor for every worker (`ClusterLimits`): a model's `concurrency`, `requests_per_minute`
and `requests_per_day` then hold for the run as a whole, not per worker. A permit is a
lease that expires after the model's timeout, so a worker that dies holding one (a lost
node) cannot hold it for ever.

This module is loaded by --executor ray only, and imports ray where it calls it."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path
from typing import Any

from runner.llm.cache.store import JsonCache
from runner.llm.client.limits import BudgetSpent, DailyBudget, RateWindow

LEASE_CHECK_SECONDS = 1.0


class CacheOwner:
    """The driver's LLM cache, served to workers that cannot open it."""

    def __init__(self, directory: str) -> None:
        self._cache = JsonCache(Path(directory))

    def get(self, key: str) -> Any:
        return self._cache.get(key)

    def set_many(self, pairs: list[tuple[str, Any]]) -> None:
        self._cache.set_many(pairs)


class RemoteCache:
    """A JsonCache whose entries live with the cache actor (LLMService awaits `aget` and `aset`)."""

    def __init__(self, owner: Any) -> None:
        self._owner = owner

    async def aget(self, key: str) -> Any:
        return await self._owner.get.remote(key)

    async def aset(self, key: str, value: Any) -> None:
        await self._owner.set_many.remote([(key, value)])

    def close(self) -> None:
        return None


class LimitsOwner:
    """Run-wide permits, request windows and daily budgets, per model (an async actor)."""

    def __init__(self, cache_dir: str) -> None:
        self._cache_dir = Path(cache_dir)
        self._free: dict[str, int] = {}
        self._leases: dict[int, tuple[str, float]] = {}      # lease: (model, expiry)
        self._ids = itertools.count(1)
        self._changed = asyncio.Event()
        self._windows: dict[str, RateWindow] = {}
        self._budget: DailyBudget | None = None

    async def acquire(self, model: str, concurrency: int, lease_seconds: float) -> int:
        self._free.setdefault(model, concurrency)
        while self._free[model] <= 0:
            self._expire()
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), LEASE_CHECK_SECONDS)
            except TimeoutError:
                pass
        self._free[model] -= 1
        lease = next(self._ids)
        self._leases[lease] = (model, time.monotonic() + lease_seconds)
        return lease

    def release(self, lease: int) -> None:
        held = self._leases.pop(lease, None)
        if held is not None:
            self._free[held[0]] += 1
            self._changed.set()

    def _expire(self) -> None:
        now = time.monotonic()
        for lease, (_, expiry) in list(self._leases.items()):
            if expiry < now:
                self.release(lease)

    async def pace(self, model: str, per_minute: int) -> None:
        window = self._windows.setdefault(model, RateWindow(per_minute))
        await window.wait()

    def spend(self, model_key: str, limit: int, shown: str) -> str | None:
        """None, or why today's budget is spent."""
        if self._budget is None:
            self._budget = DailyBudget(self._cache_dir)
        try:
            self._budget.spend(model_key, limit, shown)
        except BudgetSpent as exc:
            return str(exc)
        return None


class ClusterGate:
    """A ModelGate (runner/llm/client/limits.py) whose permits and pace come from LimitsOwner."""

    semaphore = None                    # no adaptive limit of its own

    def __init__(self, owner: Any, model: str, concurrency: int | None, per_minute: int | None,
                 lease_seconds: float) -> None:
        self._owner, self._model = owner, model
        self._concurrency, self._per_minute, self._lease_seconds = concurrency, per_minute, lease_seconds
        self._leases: list[int] = []

    async def __aenter__(self) -> None:
        if self._concurrency:
            self._leases.append(await self._owner.acquire.remote(self._model, self._concurrency, self._lease_seconds))

    async def pace(self) -> None:
        if self._per_minute:
            await self._owner.pace.remote(self._model, self._per_minute)

    async def __aexit__(self, *exc: object) -> None:
        if self._concurrency and self._leases:
            await self._owner.release.remote(self._leases.pop())


class ClusterLimits:
    """What a worker's Sender asks for its gates and daily budget (runner/llm/client/sender.py)."""

    def __init__(self, owner: Any) -> None:
        self._owner = owner

    def gate(self, spec: Any) -> ClusterGate | None:
        concurrency = spec.limits.get("concurrency")
        per_minute = spec.limits.get("requests_per_minute")
        if not concurrency and not per_minute:
            return None
        # A lease outlives any call of the model (retries included) before it is taken back.
        return ClusterGate(self._owner, spec.name, concurrency, per_minute, spec.timeout * (spec.retries + 1) + 60)

    def budget(self) -> ClusterBudget:
        return ClusterBudget(self._owner)


class ClusterBudget:
    def __init__(self, owner: Any) -> None:
        self._owner = owner

    def spend(self, model_key: str, limit: int, shown: str) -> None:
        import ray
        refused = ray.get(self._owner.spend.remote(model_key, limit, shown))
        if refused is not None:
            raise BudgetSpent(refused)
