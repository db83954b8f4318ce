"""The run's limits served to worker processes over a socket: permits held run-wide, and a
permit granted to a call that was cancelled meanwhile handed back."""

from __future__ import annotations

import asyncio

from runner.engine.executors.limits import LimitsOwner
from runner.engine.executors.limits_socket import LimitsClient, serve


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
