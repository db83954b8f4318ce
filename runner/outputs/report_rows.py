"""Which items a report lists (report_view.RowChooser picks them in one pass): the results of
lowest index kept in bounded memory, those needing review first, and what the run covers."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

HTML_ROWS = 1000            # report.html stays a few MB at any size (bench/report_browser.py)
MARKDOWN_ROWS = 200


def index_of(result: dict[str, Any]) -> int:
    value = result.get("index")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class LowestIndex:
    """The `size` results of lowest index offered so far (a max-heap on index), each with what
    was said of it; `order` (unique, increasing) breaks ties, so `said` is never compared."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.heap: list[tuple[int, int, dict[str, Any], Any]] = []

    def offer(self, order: int, result: dict[str, Any], said: Any) -> None:
        entry = (-index_of(result), -order, result, said)
        if len(self.heap) < self.size:
            heapq.heappush(self.heap, entry)
        elif self.size and entry > self.heap[0]:
            heapq.heapreplace(self.heap, entry)

    def results(self) -> list[tuple[dict[str, Any], Any]]:
        return [(result, said) for _, _, result, said in sorted(self.heap, reverse=True)]


def review_first(items: list[Any], passes: Callable[[Any], bool]) -> list[tuple[int, Any]]:
    """The same rule over already chosen rows, for a smaller page: (position, item), those
    needing review first, each group in the order given."""
    return sorted(enumerate(items), key=lambda pair: passes(pair[1]))


@dataclass(frozen=True)
class RunScope:
    """How much of the run the report covers: `159 of 300` when interrupted or partial."""
    done: int
    planned: int | None = None
    interrupted: bool = False
    partial: bool = False

    @classmethod
    def of(cls, summary: dict[str, Any], seen: int) -> RunScope:
        """As the run's line says it: an interrupted run of what it planned, a partial one (--limit,
        --filter) of the input's items."""
        total, planned = summary.get("total"), summary.get("planned")
        if summary.get("partial") is True and summary.get("interrupted") is not True:
            planned = summary.get("input_items", planned)
        done = total if isinstance(total, int) and not isinstance(total, bool) else seen
        return cls(done, planned if isinstance(planned, int) and not isinstance(planned, bool) else None,
                   summary.get("interrupted") is True, summary.get("partial") is True)

    @property
    def incomplete(self) -> bool:
        return self.interrupted or self.partial or (self.planned is not None and self.planned != self.done)

    @property
    def count(self) -> str:
        """`159 of 300` for an incomplete run whose plan is known, else `159`."""
        return f"{self.done} of {self.planned}" if self.planned is not None and self.incomplete else str(self.done)

    @property
    def headline(self) -> str:
        """What qualifies every headline of an incomplete run; empty for a complete one."""
        if not self.incomplete:
            return ""
        why = "interrupted" if self.interrupted else "partial run"
        if self.planned is None:
            return f"{self.done} items, {why}: the number planned is not recorded"
        return f"{self.count} items, {why}"
