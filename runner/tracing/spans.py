"""An observer that records each item as a tree of spans (item > steps > LLM calls) and
hands the finished tree to a backend, in one worker thread, when the item ends.

Backends (MLflow today) only implement `setup` and `export`; whatever they do (blocking
HTTP, their own logging) happens off the event loop, in a few threads. A backend failure is said once and
turns tracing off for the rest of the run: it never fails an item or changes a result."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runner.engine.observe import LLMCall, Observer
from runner.safetext import each_string

if TYPE_CHECKING:
    from runner.inputs import Item
    from runner.pipeline.model import StepSpec


@dataclass
class Span:
    name: str
    kind: str                            # item | step | llm
    started_ns: int
    inputs: Any = None
    outputs: Any = None
    attributes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    ended_ns: int = 0
    children: list[Span] = field(default_factory=list)

    def walk(self) -> list[Span]:
        return [self, *(s for child in self.children for s in child.walk())]


class TracingFailed(Exception):
    """What a backend raises when it could not record a trace."""


EXPORT_THREADS = 4     # a trace is several requests: one thread would hold up a fast run
_current: contextvars.ContextVar[Span | None] = contextvars.ContextVar("runner_span", default=None)


class SpanRecorder(Observer):
    backend = "?"

    def __init__(self, redact: Callable[[str], str], warn: Callable[[str], None]):
        self.redact = redact
        self.warn = warn
        self.failed = False
        self.traces = 0
        self._ready = False
        self._lock = threading.Lock()
        self._roots: dict[int, Span] = {}
        self._pool: ThreadPoolExecutor | None = None

    def setup(self) -> None:
        """Connect, once, before the first export (in the worker thread, as export is); raise to give up."""

    def export(self, root: Span, result: dict[str, Any]) -> dict[str, Any]:
        """Record one item's trace; the fields to add to its result."""
        raise NotImplementedError

    def item_start(self, item: Item) -> None:
        root = Span(f"item {item.index}", "item", time.time_ns(), inputs=item.value)
        self._roots[item.index] = root
        _current.set(root)

    def step_start(self, item: Item, spec: StepSpec) -> Any:
        parent = _current.get() or self._roots.get(item.index)
        if parent is None:
            return None
        span = Span(spec.id, "step", time.time_ns(), attributes={"uses": spec.uses})
        parent.children.append(span)
        return span, _current.set(span)

    def step_end(self, token: Any, result: Any, error: str | None) -> None:
        if token is None:
            return
        span, context_token = token
        span.outputs, span.error, span.ended_ns = result, error, time.time_ns()
        _current.reset(context_token)

    def llm_call(self, call: LLMCall) -> None:
        parent = _current.get() or self._roots.get(call.item)
        if parent is None:
            return
        parent.children.append(Span(
            f"llm:{call.model}", "llm", call.started_ns, inputs={"messages": call.messages},
            outputs=None if call.response is None else {"response": call.response},
            attributes={"model": call.model, "model_id": call.model_id, "endpoint": call.endpoint,
                        "cached": call.cached, "attempts": call.attempts, "usage": call.usage},
            error=call.error, ended_ns=call.ended_ns))

    async def item_end(self, item: Item, result: dict[str, Any]) -> None:
        root = self._roots.pop(item.index, None)
        if root is None or self.failed:
            return
        root.outputs, root.error, root.ended_ns = dict(result), result.get("error"), time.time_ns()
        if result.get("memo_hit"):
            root.attributes["memo_hit"] = True       # reused from the memo store: no step ran
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=EXPORT_THREADS, thread_name_prefix="runner-tracing")
        # Redacted here, on the loop: the secrets it reads (model specs) are the loop's.
        fields = await asyncio.get_running_loop().run_in_executor(
            self._pool, self._export, self._redacted(root), self._scrub(dict(result)))
        result.update(fields)

    def _export(self, root: Span, result: dict[str, Any]) -> dict[str, Any]:
        try:
            with self._lock:
                if self.failed:
                    return {}
                if not self._ready:
                    self.setup()
                    self._ready = True
            fields = self.export(root, result)
        except Exception as exc:  # a tracing backend must never fail an item: said once, then off
            with self._lock:
                first, self.failed = not self.failed, True
            if first:
                self.warn(f"tracing ({self.backend}) is off for the rest of this run: "
                          f"{self.redact(' '.join(str(exc).split()))[:500]}")
            return {}
        with self._lock:
            self.traces += 1
        return fields

    def _redacted(self, span: Span) -> Span:
        return Span(span.name, span.kind, span.started_ns, self._scrub(span.inputs), self._scrub(span.outputs),
                    self._scrub(span.attributes), self._scrub(span.error), span.ended_ns,
                    [self._redacted(child) for child in span.children])

    def _scrub(self, value: Any) -> Any:
        return each_string(value, self.redact)

    async def aclose(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
