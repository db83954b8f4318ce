"""How many items are running right now: the engine counts them, a batch collector reads
the count (every running item waiting on a batched call means: submit now)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


class ItemsInFlight:
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
