"""What Ray workers reach through actors on the driver's node: the LLM cache (for a worker
on another machine, which cannot see the driver's disk) and the models' limits (the
LimitsOwner of limits.py, as an actor).

This module is loaded by --executor ray only, and imports ray where it calls it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.llm.cache.store import JsonCache
from runner.llm.client.limits import BudgetSpent


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


class RayLimits:
    """The limits actor's calls: its limits awaited (limits.Owner), and the daily budgets it
    counts (a worker's DailyBudget: the cache folder may be on another machine)."""

    def __init__(self, actor: Any) -> None:
        self._actor = actor

    async def acquire(self, model: str, concurrency: int, lease_seconds: float) -> int:
        lease: int = await self._actor.acquire.remote(model, concurrency, lease_seconds)
        return lease

    async def release(self, lease: int) -> None:
        await self._actor.release.remote(lease)

    async def pace(self, model: str, per_minute: int) -> None:
        await self._actor.pace.remote(model, per_minute)

    def spend(self, model_key: str, limit: int, shown: str) -> None:
        import ray
        refused = ray.get(self._actor.spend.remote(model_key, limit, shown))
        if refused is not None:
            raise BudgetSpent(refused)

    def close(self) -> None:
        return None
