"""What a run tells as it unfolds: the hooks the engine and the LLM service call (items, steps,
LLM calls; the default observer does nothing, tracing (runner/tracing/) is one observer behind
it), and how many items are running right now: the engine counts them, a batch collector reads
the count (every running item waiting on a batched call means: submit now)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runner.inputs import Item
    from runner.pipeline.model import StepSpec


@dataclass
class LLMCall:
    """One answer from a model (cached or sent), or the error that ended the call."""

    item: int
    model: str                          # the name under models:
    model_id: str                       # e.g. ollama_chat/gpt-oss:20b
    endpoint: str
    messages: list[dict[str, Any]]
    response: str | None
    started_ns: int                     # time.time_ns()
    ended_ns: int
    cached: bool = False
    attempts: int = 0                   # requests sent for this answer (0 when cached)
    usage: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


class Observer:
    """Every hook is called from the run's event loop and must return quickly."""

    def item_start(self, item: Item) -> None:
        return None

    async def item_end(self, item: Item, result: dict[str, Any]) -> None:
        """Called once the item's result is known (before it is stored); may add fields to it."""

    def step_start(self, item: Item, spec: StepSpec) -> Any:
        """A token handed back to step_end."""

    def step_end(self, token: Any, result: Any, error: str | None) -> None:
        return None

    def llm_call(self, call: LLMCall) -> None:
        return None

    async def aclose(self) -> None:
        return None


NULL_OBSERVER = Observer()


class ItemsInFlight:
    """The items running now (run_items counts them), and who hears each one leave."""

    def __init__(self) -> None:
        self.count = 0
        self._listeners: list[Callable[[], None]] = []

    def listen(self, listener: Callable[[], None]) -> None:
        """Called (synchronously, cheaply) whenever an item leaves."""
        self._listeners.append(listener)

    @contextmanager
    def item(self) -> Iterator[None]:
        self.count += 1
        try:
            yield
        finally:
            self.count -= 1
            for listener in self._listeners:
                listener()
