"""Items as a re-iterable stream: each pass reads the input again, one item at a time, so a
run of any size never holds its items (`len` is one counting pass, done once)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from runner.inputs import Item


class ItemStream:
    def __init__(self, open_items: Callable[[], Iterable[Item]], count: Callable[[], int] | None = None):
        self._open = open_items
        self._count: int | None = None
        self._counter = count         # a cheaper count than a pass over the items, where there is one

    def __iter__(self) -> Iterator[Item]:
        return iter(self._open())

    def __len__(self) -> int:
        if self._count is None:
            self._count = self._counter() if self._counter is not None else sum(1 for _ in self)
        return self._count

    @classmethod
    def of(cls, items: list[Item]) -> ItemStream:
        return cls(lambda: items, lambda: len(items))
