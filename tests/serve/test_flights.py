"""One computation per key: callers at once share it; a caller who joined computes the value
itself when the one computing it was cancelled."""

from __future__ import annotations

import asyncio

from runner.serve.judging import SingleFlight


def test_callers_at_once_share_one_computation_and_a_cancelled_owner_hands_it_on():
    async def scenario() -> tuple[list, list, int]:
        flights: SingleFlight[str] = SingleFlight()
        started: list[str] = []
        release = asyncio.Event()

        async def compute(who: str) -> str:
            started.append(who)
            await release.wait()
            return f"computed by {who}"

        owner = asyncio.ensure_future(flights.run("k", lambda: compute("owner")))
        await asyncio.sleep(0)
        joined = [asyncio.ensure_future(flights.run("k", lambda: compute("other"))) for _ in range(2)]
        await asyncio.sleep(0)
        owner.cancel()                        # the owner goes: one of the others computes it
        await asyncio.sleep(0.01)
        release.set()
        answers = await asyncio.gather(*joined)
        again = await flights.run("k", lambda: compute("later"))
        return answers, started, len(flights) + (again[1] is False)

    answers, started, left = asyncio.run(scenario())
    assert started == ["owner", "other", "later"]
    assert sorted(answers) == [("computed by other", False), ("computed by other", True)]
    assert left == 1          # nothing left running; the later caller computed its own
