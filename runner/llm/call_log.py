"""The call log: every request a call makes (answered from the cache or sent, failed or not)
handed to a recorder as it ends, numbered within its item (one the run's stop cancels too).

A run's recorder (`RunCalls`) writes it as a line of calls.jsonl, secrets taken out, and
tells the tracing observer; `runner render`'s (runner/render/sink.py) prints its prompt. A
sweep's call known to fail is not made, and not logged (the known-failures layer is above)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from runner.engine.observe import NULL_OBSERVER, LLMCall, Observer
from runner.errors import NeedsModel
from runner.llm.calls.record import line_of, utc
from runner.llm.client.spec import ModelSpec
from runner.llm.request import Ask, Failed, Layer, Made, Recorder, Reply
from runner.llm.writer import Writer
from runner.safetext import each_string

CANCELLED = "cancelled: the run was stopped before an answer came"


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
