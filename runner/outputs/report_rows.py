"""Which items a report lists, chosen in one pass over any number of results with bounded
state: tallies, and at most `limit` rows, those that need a person first (errored, failed,
neither), then passing ones while room remains, shown in index order."""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

HTML_ROWS = 1000            # report.html stays a few MB at any size (bench/report_browser.py)
MARKDOWN_ROWS = 200


def index_of(result: dict[str, Any]) -> int:
    value = result.get("index")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class _Lowest:
    """The `size` results of lowest index seen so far (a max-heap on index), each with what
    was said of it."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.heap: list[tuple[int, int, dict[str, Any], Any]] = []

    def offer(self, order: int, result: dict[str, Any], said: Any) -> None:
        entry = (-index_of(result), -order, result, said)      # order is unique: `said` is never compared
        if len(self.heap) < self.size:
            heapq.heappush(self.heap, entry)
        elif self.size and entry > self.heap[0]:
            heapq.heapreplace(self.heap, entry)

    def results(self) -> list[tuple[dict[str, Any], Any]]:
        return [(result, said) for _, _, result, said in sorted(self.heap, reverse=True)]


class RowPicker:
    """`offer` each result with its verdict and status (`pass` needs no review), then `chosen()`:
    the chosen results, each with whether it passed; tallies of all as they went by."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seen = 0
        self.statuses: Counter[str] = Counter()
        self.verdict_status: dict[str, str] = {}     # each verdict's status, as first seen
        self._review, self._passing = _Lowest(limit), _Lowest(limit)
        self._order = itertools.count()

    @property
    def review(self) -> int:
        return self.seen - self.statuses["pass"]

    def offer(self, result: dict[str, Any], verdict: str, status: str, passed: bool | None = None) -> None:
        """One result, its verdict and status, and whether it passed (kept with a chosen row)."""
        self.seen += 1
        self.statuses[status] += 1
        self.verdict_status.setdefault(verdict, status)
        (self._passing if status == "pass" else self._review).offer(next(self._order), result, passed)

    def chosen(self) -> list[tuple[dict[str, Any], bool | None]]:
        """(result, passed) of the chosen rows, in index order."""
        chosen = self._review.results()
        chosen += self._passing.results()[:self.limit - len(chosen)]
        return sorted(chosen, key=lambda row: index_of(row[0]))


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
        total, planned = summary.get("total"), summary.get("planned")
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
