"""The layers of a call (runner/llm/request.py says what they pass each other; runner/llm/service.py
puts them together, outermost first: Answers, Cache, KnownFailures, CallLog, Parse).

- Reading answers: the layer that parses each answer against the step's schema (`Parse`), and the
  call around the layers (`Answers`): its requests made one after another while an answer that
  could not be read may be asked again (the step's `repair:`), and the call's result.
- What is known of a request before it is sent: its answer in the response cache (`Cache`), or,
  in a sweep, that it fails (`KnownFailures`). The cache layer finds the answer (one handed to
  the writer and not committed yet included) and passes it down on the ask, to be read and
  logged below like a sent one; a fresh answer that comes back read is stored. A `cache_as`
  answer made by another model or endpoint is counted, and said at the end.
- The call log (`CallLog`): every request a call makes (answered from the cache or sent, failed
  or not) handed to a recorder as it ends, numbered within its item (one the run's stop cancels
  too). A run's recorder (`RunCalls`) writes it as a line of calls.jsonl, secrets taken out, and
  tells the tracing observer; `runner render`'s (runner/render/sink.py) prints its prompt. A
  sweep's call known to fail is not made, and not logged (the known-failures layer is above)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runner.engine.observe import NULL_OBSERVER, LLMCall, Observer
from runner.errors import NeedsModel, StepError
from runner.llm.cache.key import cached_completion, new_entry, usable
from runner.llm.cache.store import JsonCache
from runner.llm.calls.record import line_of, utc
from runner.llm.client.parsing import ParseFailure, parse_answer
from runner.llm.client.sender import ModelStats
from runner.llm.client.spec import ModelSpec
from runner.llm.client.structured import FormatChoices
from runner.llm.request import Ask, CallRequest, Failed, Layer, Made, Recorder, Reply
from runner.llm.writer import Writer
from runner.safetext import clean_value, each_string

CANCELLED = "cancelled: the run was stopped before an answer came"


@dataclass
class Parse:
    """The answer (the cache's, else the transport's) read: JSON and the schema checked; else Failed with a re-ask."""

    inner: Layer

    async def __call__(self, ask: Ask) -> Reply:
        if ask.cached is not None:
            reply = Reply(cached_completion(ask.cached, ask.spec.model), ask.key, cached=True)
        else:
            reply = await self.inner(ask)
        schema = ask.request.output_schema
        try:
            # A cached answer passed this very schema (the key holds it) before it was stored.
            reply.output = parse_answer(reply.completion.text or "", None if reply.cached else schema,
                                        ask.request.as_json or schema is not None)
        except ParseFailure as exc:
            reask = [{"role": "assistant", "content": reply.completion.text or ""},
                     {"role": "user", "content": f"Your answer could not be used: {exc}. "
                                                 "Answer again, following the required format exactly."}]
            raise Failed(f"{ask.spec.describe()}: {exc}", reply, reask=reask) from None
        return reply


@dataclass
class Answers:
    """A call: one request, and another for each answer that could not be read while `repair` allows."""

    layers: Layer
    formats: FormatChoices            # the structured-output mode each endpoint takes now
    key: Callable[..., str]           # (spec, messages, sampling, request, mode) -> the cache key

    async def answer(self, spec: ModelSpec, request: CallRequest, stats: ModelStats) -> dict[str, Any]:
        """The call's result, or StepError with what it left (`partial`); the first request's key names it."""
        sampling = {**spec.sampling, **{k: v for k, v in request.sampling.items() if v is not None}}
        if "temperature" in sampling:
            sampling["temperature"] = float(sampling["temperature"])
        messages = [clean_value(dict(m)) for m in request.messages]     # as sent, keyed and logged: UTF-8
        schema = request.output_schema
        started, tried, first, attempt = time.perf_counter(), 0, "", 0      # tried: requests sent, retries too
        while True:
            mode = self.formats.first(spec, schema) if schema is not None else "none"
            ask = Ask(request, spec, messages, sampling, mode,
                      functools.partial(self.key, spec, messages, sampling, request), stats)
            first = first or ask.key
            try:
                reply = await self.layers(ask)
            except Failed as failed:
                tried += failed.attempts
                if failed.reask and attempt < request.repair:
                    messages, attempt = [*messages, *failed.reask], attempt + 1
                    continue
                stats.failures += 1
                raise CallFailed(failed.message, first,
                                 result(spec, failed.reply, started, (attempt + 1, tried), failed.message)) from None
            tried += reply.attempts
            extra: dict[str, Any] = {"logprobs": reply.completion.logprobs} if request.logprobs else {}   # null: none
            if request.embed:
                extra["vectors"] = reply.completion.vectors
            return result(spec, reply, started, (attempt + 1, tried), **extra)


class CallFailed(StepError):
    """A call with no usable answer; `key`: its first request's (a sweep's known failures are kept by it)."""

    def __init__(self, message: str, key: str, partial: dict[str, Any]):
        super().__init__(message, partial)
        self.key = key


def result(spec: ModelSpec, reply: Reply | None, started: float, made: tuple[int, int], error: str | None = None,
           **extra: Any) -> dict[str, Any]:
    """A call's result from its last reply (a failed call's, if any came); `made`: the requests made
    (a re-ask is one more) and their sends (retries too)."""
    completion = reply.completion if reply else None
    return {"output": reply.output if reply else None, "raw": completion.text if completion else None,
            "model": spec.name, "model_id": spec.model,
            "usage": completion.usage if completion else {}, "cost": completion.cost if completion else 0.0,
            "cached": reply.cached if reply else False, "latency_ms": round((time.perf_counter() - started) * 1000),
            "error": error, "calls": made[0], "attempts": made[1], **extra}


@dataclass
class Cache:
    """The response cache as a layer (`no_cache`: nothing read, every answer still stored)."""

    inner: Layer
    cache: Callable[[], JsonCache]              # opened on first use
    answers: Writer                             # the writer of the cache's answers
    no_cache: bool
    no_cache_as: bool
    made_by: Callable[[ModelSpec], str]         # the model and endpoint a fresh answer is kept as made by
    redact: Callable[[str], str]
    borrowed: Counter[tuple[str, str, str]] = field(default_factory=Counter)    # (seat, cache_as, made by): answers

    async def __call__(self, ask: Ask) -> Reply:
        key = ask.key
        ask.cached = None if self.no_cache else usable(self.answers.pending.get(key) or await self._get(key),
                                                       ask.request.embed)
        if ask.cached is not None:
            ask.stats.cache_hits += 1
            self._note_borrowed(ask.spec, ask.cached)
        reply = await self.inner(ask)
        if not reply.cached:
            ask.stats.answered += 1
            entry = new_entry(reply.completion.text or "", reply.completion, ask.request.logprobs,
                              made_by=self.made_by(ask.spec))
            cache = self.cache()
            if hasattr(cache, "aset"):
                await self.answers.cache_set_shared(cache, reply.key, entry)
            else:
                self.answers.cache_set(cache, reply.key, entry)
        return reply

    async def _get(self, key: str) -> Any:
        """The cache's entry for `key`: asked of the cache's owner (a Ray worker on another machine's), or read here."""
        cache = self.cache()
        remote = getattr(cache, "aget", None)
        return await remote(key) if remote is not None else cache.get(key)

    def _note_borrowed(self, spec: ModelSpec, cached: dict[str, Any]) -> None:
        made_by = cached.get("made_by") if spec.cache_as and not self.no_cache_as else None
        if isinstance(made_by, str) and made_by != self.made_by(spec):
            self.borrowed[(spec.name, str(spec.cache_as), self.redact(made_by))] += 1

    def hints(self) -> list[str]:
        return [f"{n} answer(s) of {name} came from the cache_as '{as_}' cache, made by {by}; --no-cache-as "
                "keeps each endpoint's answers apart" for (name, as_, by), n in self.borrowed.items()]


@dataclass
class KnownFailures:
    """A sweep's calls known to fail (`RunOptions.failed_calls`, cache key: error), failed with it
    unsent; a call that fails is added under its first request's key, so a sweep sends each at
    most once. None: every call is made."""

    inner: Layer
    failed: dict[str, str] | None

    async def __call__(self, ask: Ask) -> Reply:
        if ask.cached is None and self.failed is not None and ask.key in self.failed:
            raise Failed(self.failed[ask.key])
        return await self.inner(ask)

    def add(self, key: str, message: str) -> None:
        if self.failed is not None:
            self.failed.setdefault(key, message)


@dataclass
class CallLog:
    """The layer: each request's outcome to the recorder, whatever it was."""

    inner: Layer
    recorder: Recorder
    _numbers: dict[int, int] = field(default_factory=dict)      # item: requests logged so far

    async def __call__(self, ask: Ask) -> Reply:
        item = ask.request.item
        self._numbers[item] = number = self._numbers.get(item, 0) + 1
        began = time.time_ns()
        try:
            reply = await self.inner(ask)
        except Failed as failed:
            self.recorder.record(Made(ask, f"{item}.{number}", began, time.time_ns(), failed.reply, failed.message,
                                      failed.attempts))
            raise
        except NeedsModel as stop:          # render's transport: no answer to go on with
            self.recorder.record(Made(ask, f"{item}.{number}", began, time.time_ns(), None, str(stop)))
            raise
        except asyncio.CancelledError:      # Ctrl-C or SIGTERM: a request counted as sent has its line, saying so
            if ask.sent:
                self.recorder.record(Made(ask, f"{item}.{number}", began, time.time_ns(), None, CANCELLED))
            raise
        self.recorder.record(Made(ask, f"{item}.{number}", began, time.time_ns(), reply, None, reply.attempts))
        return reply

    def forget(self, item: object) -> None:
        """A finished item: its numbering starts again should it be asked again."""
        if isinstance(item, int):
            self._numbers.pop(item, None)


@dataclass
class RunCalls:
    """A run's recorder: the line of calls.jsonl (when the run keeps one) and the tracing event."""

    writer: Writer
    observer: Observer
    redact: Callable[[str], str]                  # a message runner made (an error)
    endpoint: Callable[[ModelSpec], str]          # a model's endpoint as calls.jsonl names it
    hide_secrets: Callable[[str], str]            # what was sent (the prompt): known secrets by value only

    def record(self, made: Made) -> None:
        ask, reply = made.ask, made.reply
        error = self.redact(made.error) if made.error else made.error   # it may name the endpoint, query key and all
        answer = reply.completion.text if reply else None
        usage = reply.completion.usage if reply else {}
        cached = reply.cached if reply else False
        if self.writer.calls is not None:       # the fields of calls.jsonl (runner/llm/calls/__init__.py), `item` first
            self.writer.add_calls([line_of({
                "item": ask.request.item, "call": made.number, "step": ask.request.step, "model": ask.spec.name,
                "model_id": ask.spec.model, "endpoint": self.endpoint(ask.spec), "key": reply.key if reply else ask.key,
                "messages": each_string(ask.messages, self.hide_secrets), "answer": answer, "usage": usage,
                "attempts": made.attempts, "started": utc(made.began_ns), "ended": utc(made.ended_ns),
                "latency_ms": round((made.ended_ns - made.began_ns) / 1e6), "cached": cached, "error": error})])
        if self.observer is not NULL_OBSERVER:
            self.observer.llm_call(LLMCall(
                ask.request.item, ask.spec.name, ask.spec.model, self.endpoint(ask.spec), ask.messages,
                answer, made.began_ns, made.ended_ns, cached, made.attempts, usage, error))
