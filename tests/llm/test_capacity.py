"""The adaptive limit of a local server, step by step (the fake servers in
test_llm_servers.py exercise it whole)."""

from __future__ import annotations

import asyncio

from runner.llm.client.limits import AdaptiveLimit, server_root, slots_in


def test_the_limit_rises_while_latency_holds_and_settles_below_where_it_grew(capsys):
    limit = AdaptiveLimit("http://127.0.0.1:8080/v1", "m", ceiling=8)
    for _ in range(3):
        limit.observe(1, 0.20)
    assert limit.limit == 2
    limit.observe(1, 9.0)                       # sent at the old level: not this window's
    for seconds in (0.21, 0.19, 0.22, 0.80):    # one slow answer does not decide
        limit.observe(2, seconds)
    assert limit.limit == 3 and not limit.settled
    for _ in range(6):
        limit.observe(3, 0.45)                  # queued in the server
    assert limit.limit == 2 and limit.settled
    limit.observe(2, 0.1)
    assert limit.limit == 2
    assert capsys.readouterr().err.count("sending it up to 2 request(s) at a time (its answers slowed") == 1


def test_a_one_slot_server_settles_at_one(capsys):
    """A server that answers one request at a time: two sent at once each wait for the other
    (twice the time). What test_llm_servers.py's one-slot server does, with its timings fixed
    here: there a busy machine's delays add to every answer and can hide the doubling."""
    limit = AdaptiveLimit("e", "m", ceiling=8)
    for seconds in (0.9, 0.5, 0.5):             # the first pays for its connection
        limit.observe(1, seconds)
    assert limit.limit == 2 and not limit.settled
    for _ in range(4):
        limit.observe(2, 1.0)
    assert limit.limit == 1 and limit.settled
    limit.finish()
    assert capsys.readouterr().err.count(
        "sending it up to 1 request(s) at a time (its answers slowed when sent more at once") == 1


def test_an_overload_halves_the_limit_and_keeps_it(capsys):
    limit = AdaptiveLimit("e", "m", ceiling=16)
    limit.limit = 6
    limit.overloaded("it answered HTTP 503")
    assert limit.limit == 3 and limit.settled
    for _ in range(10):
        limit.observe(3, 0.1)
    assert limit.limit == 3
    assert "up to 3 request(s) at a time (it answered HTTP 503" in capsys.readouterr().err


def test_the_ceiling_is_the_runs_concurrency():
    limit = AdaptiveLimit("e", "m", ceiling=2)
    for level in (1, 2):
        for _ in range(4):
            limit.observe(level, 0.1)
    assert limit.limit == 2


def test_places_are_given_in_order_as_the_limit_rises():
    async def go() -> list[int]:
        limit = AdaptiveLimit("e", "m", ceiling=4)
        order: list[int] = []

        async def call(n: int) -> None:
            await limit.acquire()
            order.append(n)

        tasks = [asyncio.ensure_future(call(n)) for n in range(3)]
        await asyncio.sleep(0)
        assert order == [0]
        for _ in range(3):
            limit.observe(1, 0.1)               # the limit becomes 2: one more place
        await asyncio.sleep(0)
        assert order == [0, 1]
        limit.release()
        await asyncio.gather(*tasks)
        return order
    assert asyncio.run(go()) == [0, 1, 2]


def test_what_a_llama_cpp_server_reports():
    assert server_root("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080"
    assert server_root("http://h:1/proxy/v1/") == "http://h:1/proxy"
    assert slots_in("/props", {"total_slots": 4}) == 4
    assert slots_in("/props", {"total_slots": True}) is None
    assert slots_in("/props", {"total_slots": 0}) is None
    assert slots_in("/slots", [{"id": 0}, {"id": 1}]) == 2
    assert slots_in("/slots", {"object": "list", "data": []}) is None
