"""Model limits held for every worker of a run at once: a model's `concurrency` and
`requests_per_minute` hold for the run as a whole, not per worker (its `requests_per_day`
is counted in the cache folder).

One LimitsOwner keeps the permits and the request windows: a Ray actor on the driver's node
(--executor ray), or an object in the driver's event loop that worker processes reach over
a Unix socket (--executor processes, processes.py). A permit is a lease that expires
after the model's longest call, so a worker that dies holding one cannot hold it for ever.
A worker's LLM sender asks SharedLimits for each model's gate (runner/llm/sender.py)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from runner.llm.client.limits import BudgetSpent, DailyBudget, RateWindow
from runner.llm.client.spec import ModelSpec

LEASE_CHECK_SECONDS = 1.0


class LimitsOwner:
    """Run-wide permits, request windows and daily budgets, per model."""

    def __init__(self, cache_dir: str | Path) -> None:
        self._cache_dir = Path(cache_dir)
        self._permits: dict[str, asyncio.Semaphore] = {}
        self._leases: dict[int, tuple[str, float]] = {}      # lease: (model, expiry)
        self._ids = itertools.count(1)
        self._windows: dict[str, RateWindow] = {}
        self._budget: DailyBudget | None = None

    async def acquire(self, model: str, concurrency: int, lease_seconds: float) -> int:
        permits = self._permits.setdefault(model, asyncio.Semaphore(concurrency))
        while True:
            try:
                await asyncio.wait_for(permits.acquire(), LEASE_CHECK_SECONDS)
                break
            except TimeoutError:
                self._expire()          # a lease its worker never gave back (a lost node) returns
        lease = next(self._ids)
        self._leases[lease] = (model, time.monotonic() + lease_seconds)
        return lease

    def release(self, lease: int) -> None:
        held = self._leases.pop(lease, None)
        if held is not None:
            self._permits[held[0]].release()

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


class Owner(Protocol):
    """LimitsOwner as a worker reaches it (a Ray actor, or the driver over a socket)."""

    async def acquire(self, model: str, concurrency: int, lease_seconds: float) -> int: ...

    async def release(self, lease: int) -> None: ...

    async def pace(self, model: str, per_minute: int) -> None: ...


class Budget(Protocol):
    def spend(self, model_key: str, limit: int, shown: str) -> None: ...

    def close(self) -> None: ...


class SharedGate:
    """A ModelGate (runner/llm/limits.py) whose permits and pace come from the owner."""

    semaphore = None                    # no adaptive limit of its own

    def __init__(self, owner: Owner, model: str, concurrency: int | None, per_minute: int | None,
                 lease_seconds: float) -> None:
        self._owner, self._model = owner, model
        self._concurrency, self._per_minute, self._lease_seconds = concurrency, per_minute, lease_seconds
        self._leases: list[int] = []

    async def __aenter__(self) -> None:
        if self._concurrency:
            self._leases.append(await self._owner.acquire(self._model, self._concurrency, self._lease_seconds))

    async def pace(self) -> None:
        if self._per_minute:
            await self._owner.pace(self._model, self._per_minute)

    async def __aexit__(self, *exc: object) -> None:
        if self._concurrency and self._leases:
            await self._owner.release(self._leases.pop())


@dataclass(frozen=True)
class SharedLimits:
    """What a worker's sender asks for its gates and daily budget (runner/llm/client/sender.py).
    `most_in_flight`: the most calls the run's workers send at once between them (each its
    own `--concurrency`); a model's `concurrency` at or above it can never hold a call back,
    so its permits are not asked of the owner (a round trip to the driver for each call)."""

    owner: Owner
    budget: Callable[[], Budget]        # the daily budgets, as this worker reaches them
    most_in_flight: int

    def gate(self, spec: ModelSpec) -> SharedGate | None:
        concurrency = spec.limits.get("concurrency")
        if concurrency and concurrency >= self.most_in_flight:
            concurrency = None
        per_minute = spec.limits.get("requests_per_minute")
        if not concurrency and not per_minute:
            return None
        # A lease outlives any call of the model (retries included) before it is taken back.
        return SharedGate(self.owner, spec.name, concurrency, per_minute, spec.timeout * (spec.retries + 1) + 60)
