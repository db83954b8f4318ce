"""The one encoding path for text runner writes: results, summaries, calls.jsonl, the LLM
cache, reports and exports.

Text that cannot be UTF-8 (a lone surrogate from an escaped `\\ud83d`, or the `surrogateescape`
stand-in of an undecodable byte) becomes U+FFFD, as a UTF-8 decoder makes of a bad byte, so no
write fails on it; `xml_text` also replaces what XML 1.0 refuses. What JSON cannot hold is
refused (`writable_value`, UnwritableValue saying which): a value that holds itself, NaN or
infinity, an integer longer than Python writes. The walks never recurse and stop at a cycle."""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from typing import Any

REPLACEMENT = "\ufffd"
# Everything XML 1.0 allows is \t \n \r, U+0020-U+D7FF, U+E000-U+FFFD and U+10000 up.
# Compiled when first used (JUnit exports only): the class is slow to compile.
_NOT_XML = "[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"


def clean_text(text: str) -> str:
    """`text` with every code point UTF-8 cannot hold replaced (a valid surrogate pair,
    as two code points, becomes the character it stands for)."""
    if text.isascii() or _encodable(text):      # isascii is O(1): most text runner writes is ASCII
        return text
    # UTF-16 joins a high and a low surrogate that meet; what stays alone is replaced.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def utf8(text: str) -> bytes:
    """The bytes runner writes for `text`: UTF-8, never an error."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return clean_text(text).encode("utf-8")


class UnwritableValue(ValueError):
    """A value JSON cannot hold; the message says why ("it refers to itself", ...)."""


def _is_clean(value: Any, strict: bool = False) -> bool:
    """Whether every string in `value` is UTF-8-able, by a walk that builds nothing; UnwritableValue
    when a container holds itself (`_holds_itself`, asked only when one is reached twice), and
    with `strict` when a number cannot be written as JSON."""
    stack, seen, again, clean = [value], set(), False, True
    while stack:
        current = stack.pop()
        if isinstance(current, str):
            if clean and not current.isascii() and not _encodable(current):
                clean = False
        elif isinstance(current, (dict, list, tuple)):
            if id(current) in seen:
                again = True
                continue
            seen.add(id(current))
            if isinstance(current, dict):
                stack.extend(current)
                stack.extend(current.values())
            else:
                stack.extend(current)
        elif strict and isinstance(current, (int, float)) and (
                current.bit_length() > 3 * _MAX_DIGITS if isinstance(current, int) else not math.isfinite(current)):
            _refuse_number(current)
    if again and _holds_itself(value):
        raise UnwritableValue("it refers to itself")
    return clean


def _holds_itself(value: Any) -> bool:
    """Whether a container in `value` holds itself (directly or deeper): a walk that knows
    which containers it is inside, and walks each one once (shared ones are not walked again)."""
    stack: list[tuple[Any, bool]] = [(value, True)]
    inside: set[int] = set()
    done: set[int] = set()
    while stack:
        current, entering = stack.pop()
        if not entering:
            inside.discard(id(current))
            done.add(id(current))
        elif isinstance(current, (dict, list, tuple)) and id(current) not in done:
            if id(current) in inside:
                return True
            inside.add(id(current))
            stack.append((current, False))
            children = [*current, *current.values()] if isinstance(current, dict) else current
            stack.extend((child, True) for child in children)
    return False


_MAX_DIGITS = sys.get_int_max_str_digits() or 10**9       # Python's own limit on writing an int


def _refuse_number(value: float) -> None:
    """UnwritableValue for NaN, infinity or an integer longer than Python writes (one near the limit is tried)."""
    if isinstance(value, float):
        raise UnwritableValue(f"it holds {value!r} (JSON has no NaN or infinity)")
    try:
        str(value)
    except ValueError:
        raise UnwritableValue(f"it holds an integer of more than {_MAX_DIGITS:,} digits") from None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def each_string(value: Any, change: Callable[[str], str]) -> Any:
    """A copy of `value` with every string in it, keys too, through `change` (a tuple becomes a list)."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {each_string(k, change): each_string(v, change) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [each_string(v, change) for v in value]
    return value


def clean_value(value: Any) -> Any:
    """`value` with every string (keys too) through `clean_text`: itself when nothing needs it (checked, not copied)."""
    return value if _is_clean(value) else each_string(value, clean_text)


def writable_value(value: Any) -> Any:
    """`clean_value(value)`, or UnwritableValue when JSON cannot hold `value`: it refers to
    itself, or holds NaN, infinity or an integer longer than Python writes as text."""
    return value if _is_clean(value, strict=True) else each_string(value, clean_text)


def dumps(value: Any) -> str:
    """Compact JSON (non-ASCII kept as is) that UTF-8 can always hold."""
    return clean_text(json.dumps(value, ensure_ascii=False, default=str))


def xml_text(text: str) -> str:
    """`text` with every character XML 1.0 refuses replaced."""
    return re.sub(_NOT_XML, REPLACEMENT, clean_text(text))      # re caches the compiled pattern
