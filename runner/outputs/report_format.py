"""Values as people read them in reports: numbers to sensible precision, booleans as yes/no,
control characters made visible, and markdown that carries no raw HTML or links. And which
items a report lists (report_view.RowChooser picks them in one pass): the results of lowest
index kept in bounded memory, those needing review first, and what the run covers."""

from __future__ import annotations

import contextlib
import functools
import heapq
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# C0/C1 controls (tab, newline and carriage return are whitespace, folded elsewhere), line and
# paragraph separators, non-characters and lone surrogates: invisible or invalid in a report,
# so `VALID\v` would print as a second `VALID`.
CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ufffe\uffff\ud800-\udfff]")
NUMBER = re.compile(r"^-?\d+\.\d{5,}(e[-+]?\d+)?$")
WORDS = {"True": "yes", "False": "no", "None": "none"}
MARKDOWN_SPECIAL = str.maketrans({"\\": "\\\\", "|": "\\|", "[": "\\[", "]": "\\]", "<": "&lt;", ">": "&gt;",
                                  "&": "&amp;", "`": "\\`"})


def visible(value: str) -> str:
    """Control characters as `\\x0b`-style escapes, so two values that differ by one stay two."""
    if value.isprintable():     # a scan far faster than the pattern's: nothing CONTROLS names is printable
        return value
    return CONTROLS.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", value)


def number(value: float) -> str:
    """3 significant digits, integral values without `.0`, no exponent for large ones."""
    if not math.isfinite(value):
        return str(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if abs(value) >= 1000:
        return f"{value:.0f}"
    return f"{value:.3g}"


def text(value: Any, limit: int | None = None) -> str:
    """One line of text for any value: numbers short, yes/no, lists joined, objects as k: v."""
    if limit is not None and isinstance(value, str) and len(value) > 2 * limit:
        # A prefix of a string makes a prefix of its line: when that already passes the limit,
        # the cut is the same without reading the rest (a 60 KB value, cut to 300 characters).
        head = " ".join(visible(value[:2 * limit]).split())
        if len(head) > limit:
            return cut(head, limit)
    if value is None:
        out = ""
    elif isinstance(value, bool):
        out = "yes" if value else "no"
    elif isinstance(value, float):
        out = number(value)
    elif isinstance(value, list):
        out = ", ".join(text(v) for v in value)
    elif isinstance(value, dict):
        out = ", ".join(f"{visible(str(k))}: {text(v)}" for k, v in value.items())
    else:
        out = visible(str(value))
    return cut(" ".join(out.split()), limit)


def cut(line: str, limit: int | None) -> str:
    """`line` (as text() made it) at most `limit` characters long, an ellipsis ending a cut one."""
    return line if limit is None or len(line) <= limit else line[:limit - 1] + "…"


@functools.lru_cache(maxsize=1024)        # called once per result with a handful of distinct verdicts
def count_label(key: str) -> str:
    """A summary count key (Python's str() of the counted value) as a person reads it."""
    if key in WORDS:
        return WORDS[key]
    if NUMBER.match(key):
        with contextlib.suppress(ValueError):
            return number(float(key))
    return " ".join(visible(key).split()) or "(empty)"


def markdown(value: str) -> str:
    """Text safe in markdown: no raw HTML, no link or image syntax, no table breaks."""
    return value.translate(MARKDOWN_SPECIAL)


def safe_url(url: str) -> str | None:
    """A link target a report may carry: web addresses only (never `javascript:` or `data:`)."""
    cleaned = "".join(url.split())
    return cleaned if re.match(r"^https?://", cleaned, re.IGNORECASE) else None


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
