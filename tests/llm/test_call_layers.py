"""The layers of an LLM call (runner/llm/request.py says what they pass), each alone over a
scripted layer below it: the cache, a sweep's known failures, the call log, reading the
answer, the call's re-asks, and `runner render`'s transport."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest

from runner.errors import NeedsModel
from runner.llm.client.sender import ModelStats
from runner.llm.client.spec import ModelSpec
from runner.llm.client.structured import FormatChoices
from runner.llm.client.transport import Completion
from runner.llm.layers import Answers, Cache, CallFailed, CallLog, KnownFailures, Parse
from runner.llm.request import Ask, CallRequest, Failed, Made, Reply
from runner.llm.writer import Writer
from runner.render.sink import RenderSink

SPEC = ModelSpec("judge", "openai/m", "http://127.0.0.1:9")
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def ask(text: str = "Is 1 fine?", cached: dict[str, Any] | None = None, **request: Any) -> Ask:
    messages = [{"role": "user", "content": text}]
    return Ask(CallRequest("judge", messages, item=1, **request), SPEC, messages, {}, "none",
               lambda mode: f"key:{messages[-1]['content']}:{mode}", ModelStats(), cached)


class Below:
    """The layer below: answers in turn (a text, or a Failed to raise), and the asks it got."""

    def __init__(self, *answers: str | Failed | NeedsModel):
        self.answers = list(answers)
        self.asks: list[Ask] = []

    async def __call__(self, got: Ask) -> Reply:
        self.asks.append(got)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return Reply(Completion(answer, "stop", {"total_tokens": 3}), got.key, attempts=1)


class Kept:
    def __init__(self) -> None:
        self.made: list[Made] = []

    def record(self, made: Made) -> None:
        self.made.append(made)


class Store:
    def __init__(self) -> None:
        self.entries: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        return self.entries.get(key)

    def set_many(self, pairs: list[tuple[str, Any]]) -> None:
        self.entries.update(pairs)


def cache_layer(below: Below, store: Store) -> Cache:
    return Cache(below, lambda: store, Writer(), False, False, lambda spec: "m", str)   # type: ignore[arg-type,return-value]


def test_the_cache_hands_its_answer_down_and_keeps_a_fresh_one_that_comes_back():
    store, below = Store(), Parse(Below('{"ok": true}'))
    cache = cache_layer(below, store)      # type: ignore[arg-type]
    first = asyncio.run(cache(ask(output_schema=SCHEMA)))
    assert (first.cached, first.output) == (False, {"ok": True})
    cache.answers.flush()
    assert store.entries["key:Is 1 fine?:none"]["content"] == '{"ok": true}'
    again = ask(output_schema=SCHEMA)
    second = asyncio.run(cache(again))     # the layer below has no answer left: the cache's is read
    assert (second.cached, second.output, again.stats.cache_hits) == (True, {"ok": True}, 1)


def test_an_answer_that_could_not_be_read_is_not_kept():
    store = Store()
    cache = cache_layer(Parse(Below("not json")), store)    # type: ignore[arg-type]
    with pytest.raises(Failed) as failed:
        asyncio.run(cache(ask(as_json=True)))
    cache.answers.flush()
    assert store.entries == {} and failed.value.reask is not None
    assert failed.value.reask[0] == {"role": "assistant", "content": "not json"}


def test_a_known_failure_is_not_asked_unless_the_cache_answers():
    below = Below("yes")
    known = KnownFailures(below, {"key:Is 1 fine?:none": "server down"})
    with pytest.raises(Failed, match="server down"):
        asyncio.run(known(ask()))
    assert below.asks == []
    assert asyncio.run(known(ask(cached={"content": "yes"}))).completion.text == "yes"
    known.add("other", "first")
    known.add("other", "second")
    assert known.failed == {"key:Is 1 fine?:none": "server down", "other": "first"}
    KnownFailures(below, None).add("other", "nothing kept")      # outside a sweep: every call is made


def test_the_call_log_records_every_request_numbered_within_its_item():
    kept = Kept()
    log = CallLog(Below("yes", Failed("bad answer", attempts=2), NeedsModel("not cached")), kept)
    asyncio.run(log(ask()))
    with pytest.raises(Failed):
        asyncio.run(log(ask()))
    log.forget(1)
    with pytest.raises(NeedsModel):
        asyncio.run(log(ask()))
    assert [(m.number, m.error, m.attempts) for m in kept.made] == [
        ("1.1", None, 1), ("1.2", "bad answer", 2), ("1.1", "not cached", 0)]


def test_a_call_asks_again_while_repair_allows_and_fails_under_its_first_key(tmp_path):
    below = Below("no", "still no", "nope")
    answers = Answers(Parse(below), FormatChoices(tmp_path), lambda *a: "k")
    stats = ModelStats()
    with pytest.raises(CallFailed) as failed:
        asyncio.run(answers.answer(SPEC, CallRequest("judge", [{"role": "user", "content": "?"}], 1, as_json=True,
                                                     repair=1), stats))
    assert len(below.asks) == 2 and len(below.asks[1].messages) == 3       # the re-ask carries the bad answer
    assert failed.value.key == "k" and stats.failures == 1
    assert failed.value.partial is not None
    assert (failed.value.partial["calls"], failed.value.partial["attempts"], failed.value.partial["raw"]) == \
        (2, 2, "still no")


def test_render_is_a_transport_that_answers_nothing_and_records_each_prompt():
    out = io.StringIO()
    sink = RenderSink(out)
    log = CallLog(Parse(sink), sink)
    assert asyncio.run(log(ask("cached?", cached={"content": "yes"}))).output == "yes"
    with pytest.raises(NeedsModel):
        asyncio.run(log(ask("sent?")))
    assert sink.stats["calls"] == 2 and sink.stats["cached"] == 1
    assert "[cached] ---" in out.getvalue() and "cached?" in out.getvalue()
    assert "[not cached] ---" in out.getvalue() and "sent?" in out.getvalue()
