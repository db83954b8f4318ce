"""The run's limits served to worker processes over a socket: permits held run-wide, a
permit granted to a call that was cancelled meanwhile handed back, and a limit the workers
cannot reach not asked for."""

from __future__ import annotations

import asyncio

from runner.engine.executors.limits import LimitsOwner, SharedLimits
from runner.engine.executors.processes import LimitsClient, serve
from runner.llm.client.spec import ModelSpec, build_spec


def test_a_permit_is_held_across_clients_and_a_cancelled_wait_gives_its_permit_back(tmp_path):
    async def scenario() -> None:
        server = await serve(LimitsOwner(tmp_path), str(tmp_path / "limits"))
        first, second = LimitsClient(str(tmp_path / "limits")), LimitsClient(str(tmp_path / "limits"))
        await first.connect()
        await second.connect()
        try:
            held = await first.acquire("m", 1, 60.0)
            waiting = asyncio.ensure_future(second.acquire("m", 1, 60.0))
            await asyncio.sleep(0.1)
            assert not waiting.done()                    # one permit for both workers
            waiting.cancel()
            await first.release(held)                    # the cancelled wait is granted it, and gives it back
            again = await asyncio.wait_for(second.acquire("m", 1, 60.0), 5)
            await second.release(again)
            await second.pace("m", 600)
        finally:
            await first.close()
            await second.close()
            server.close()

    asyncio.run(scenario())


class CountingOwner:
    """An owner that counts what it is asked (the driver, as a worker sees it)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def acquire(self, model: str, concurrency: int, lease_seconds: float) -> int:
        self.asked.append(f"acquire {model} {concurrency}")
        return 1

    async def release(self, lease: int) -> None:
        self.asked.append("release")

    async def pace(self, model: str, per_minute: int) -> None:
        self.asked.append(f"pace {model} {per_minute}")


def test_a_concurrency_the_workers_cannot_reach_is_not_asked_of_the_driver():
    """Two workers of four calls each send at most eight at once: a model allowing eight or
    more never holds a call back, so its calls ask the driver for nothing; one allowing seven
    asks for a permit each time, and a rate per minute is always asked."""
    owner = CountingOwner()
    limits = SharedLimits(owner, lambda: None, most_in_flight=2 * 4)

    async def one_call(spec: ModelSpec) -> None:
        gate = limits.gate(spec)
        if gate is not None:
            async with gate:
                await gate.pace()

    def spec(**limit: int) -> ModelSpec:
        return build_spec("m", {"model": "openai/m", "limits": limit})

    assert limits.gate(spec(concurrency=8)) is None and limits.gate(spec(concurrency=80)) is None
    asyncio.run(one_call(spec(concurrency=7)))
    assert owner.asked == ["acquire m 7", "release"]
    owner.asked.clear()
    asyncio.run(one_call(spec(concurrency=8, requests_per_minute=60)))
    assert owner.asked == ["pace m 60"]
