"""The writer (runner/llm/writer.py): answers committed together, and lines of calls.jsonl
written together, once the first has waited FLUSH_EVERY (or FLUSH_AT are waiting); what
could not be written said once at the end."""

from __future__ import annotations

import asyncio
from typing import Any

from runner.llm import writer as writer_module
from runner.llm.writer import Writer


class FakeCache:
    def __init__(self, fail: bool = False) -> None:
        self.commits: list[list[tuple[str, Any]]] = []
        self.fail = fail

    def set_many(self, pairs: list[tuple[str, Any]]) -> None:
        if self.fail:
            raise OSError("disk full")
        self.commits.append(list(pairs))


def test_answers_within_the_commit_interval_are_one_transaction_and_served_until_committed(monkeypatch):
    monkeypatch.setattr(writer_module, "FLUSH_EVERY", 0.3)     # room for a busy machine to stall before the first check
    cache, writer = FakeCache(), Writer()

    async def run() -> None:
        writer.cache_set(cache, "a", 1)         # type: ignore[arg-type]
        await asyncio.sleep(0)                  # turns of the loop pass: still waiting
        writer.cache_set(cache, "b", 2)         # type: ignore[arg-type]
        await asyncio.sleep(0.01)
        assert writer.pending == {"a": 1, "b": 2} and cache.commits == []
        await asyncio.sleep(0.35)               # the first answer's interval is over
        assert cache.commits == [[("a", 1), ("b", 2)]] and writer.pending == {}
        writer.cache_set(cache, "c", 3)         # type: ignore[arg-type]
        await asyncio.sleep(0.35)
        writer.cache_set(cache, "d", 4)         # type: ignore[arg-type]

    asyncio.run(run())
    assert cache.commits == [[("a", 1), ("b", 2)], [("c", 3)]]
    writer.close()                              # the run's end commits what still waits
    assert cache.commits == [[("a", 1), ("b", 2)], [("c", 3)], [("d", 4)]]
    assert writer.pending == {}


def test_many_waiting_answers_are_committed_at_once(monkeypatch):
    monkeypatch.setattr(writer_module, "FLUSH_AT", 3)
    cache, writer = FakeCache(), Writer()

    async def run() -> None:
        for n in range(7):
            writer.cache_set(cache, str(n), n)  # type: ignore[arg-type]
        assert [len(c) for c in cache.commits] == [3, 3] and writer.pending == {"6": 6}
        writer.flush()                          # a Ray worker's report: everything so far
        assert [len(c) for c in cache.commits] == [3, 3, 1] and writer.pending == {}

    asyncio.run(run())
    writer.close()
    assert [key for commit in cache.commits for key, _ in commit] == [str(n) for n in range(7)]


def test_answers_left_waiting_by_a_loop_that_ended_go_with_the_next_loops(monkeypatch):
    monkeypatch.setattr(writer_module, "FLUSH_EVERY", 0.05)
    cache, writer = FakeCache(), Writer()

    async def first() -> None:
        writer.cache_set(cache, "a", 1)         # type: ignore[arg-type]

    async def second() -> None:
        writer.cache_set(cache, "b", 2)         # type: ignore[arg-type]
        await asyncio.sleep(0.08)

    asyncio.run(first())                        # ends before its timer fires
    assert cache.commits == [] and writer.pending == {"a": 1}
    asyncio.run(second())
    assert cache.commits == [[("a", 1), ("b", 2)]] and writer.pending == {}
    writer.close()


class Lines:
    def __init__(self, fail: bool = False) -> None:
        self.writes: list[list[bytes]] = []
        self.fail, self.closed = fail, False

    def append(self, lines: list[bytes]) -> None:
        if self.fail:
            raise PermissionError("calls.jsonl is read-only")
        self.writes.append(list(lines))

    def close(self) -> None:
        self.closed = True


def test_call_lines_go_with_the_answers_in_one_write(monkeypatch):
    monkeypatch.setattr(writer_module, "FLUSH_EVERY", 0.3)
    cache, lines = FakeCache(), Lines()
    writer = Writer(lines)

    async def run() -> None:
        writer.cache_set(cache, "a", 1)         # type: ignore[arg-type]
        writer.add_calls([b"one\n"])
        writer.add_calls([b"two\n", b"three\n"])
        await asyncio.sleep(0.01)
        assert lines.writes == [] and cache.commits == []
        await asyncio.sleep(0.35)
        assert lines.writes == [[b"one\n", b"two\n", b"three\n"]] and cache.commits == [[("a", 1)]]
        writer.add_calls([b"four\n"])

    asyncio.run(run())
    writer.close()                              # the run's end writes what still waits
    assert lines.writes[-1] == [b"four\n"] and lines.closed


def test_a_writer_without_a_calls_file_drops_call_lines():
    writer = Writer()
    writer.add_calls([b"one\n"])
    writer.close()


def test_what_could_not_be_written_is_said_once_at_the_end(capsys):
    writer = Writer(Lines(fail=True))

    async def run() -> None:
        writer.cache_set(FakeCache(fail=True), "a", 1)     # type: ignore[arg-type]
        writer.add_calls([b"one\n"])
        writer.flush()
        writer.add_calls([b"two\n"])

    asyncio.run(run())
    writer.close()
    err = capsys.readouterr().err
    assert err.count("some calls could not be written to calls.jsonl (PermissionError: calls.jsonl is read-only)") == 1
    assert err.count("some answers could not be written to the cache (OSError: disk full)") == 1
    assert writer.pending == {}


def test_without_an_event_loop_answers_are_committed_at_once():
    cache, writer = FakeCache(), Writer()
    writer.cache_set(cache, "a", 1)             # type: ignore[arg-type]
    assert cache.commits == [[("a", 1)]] and writer.pending == {}
    writer.close()


class SharedFakeCache:
    """A cache another process owns: a write takes a round trip, and may fail."""

    def __init__(self, fail: bool = False) -> None:
        self.entries: dict[str, Any] = {}
        self.fail = fail

    async def aset(self, key: str, value: Any) -> None:
        await asyncio.sleep(0.01)
        if self.fail:
            raise ConnectionError("the cache's owner is gone")
        self.entries[key] = value


def test_an_answer_for_a_shared_cache_is_there_when_the_write_returns_and_a_failure_is_said_once(capsys):
    shared, gone, writer = SharedFakeCache(), SharedFakeCache(fail=True), Writer()

    async def run() -> None:
        await writer.cache_set_shared(shared, "a", 1)
        assert shared.entries == {"a": 1}
        await writer.cache_set_shared(gone, "b", 2)      # the run goes on: the answer is in its results
        await writer.cache_set_shared(gone, "c", 3)

    asyncio.run(run())
    writer.close()
    assert shared.entries == {"a": 1} and gone.entries == {}
    err = capsys.readouterr().err
    assert err.count("some answers could not be written to the cache (ConnectionError: the cache's owner is gone)") == 1
