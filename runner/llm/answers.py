"""Reading answers: the layer that parses each answer against the step's schema (`Parse`), and the
call around the layers (`Answers`): its requests made one after another while an answer that
could not be read may be asked again (the step's `repair:`), and the call's result."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.errors import StepError
from runner.llm.cache.key import cached_completion
from runner.llm.client.parsing import ParseFailure, parse_answer
from runner.llm.client.sender import ModelStats
from runner.llm.client.spec import ModelSpec
from runner.llm.client.structured import FormatChoices
from runner.llm.request import Ask, CallRequest, Failed, Layer, Reply
from runner.safetext import clean_value


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
