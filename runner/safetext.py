"""The one encoding path for text runner writes: results, summaries, calls.jsonl, the LLM
cache, reports and exports.

Text that cannot be UTF-8 (a lone surrogate from an escaped `\\ud83d` in a JSON answer or
record, or the `surrogateescape` stand-in of an undecodable byte) becomes U+FFFD, the
replacement character a UTF-8 decoder gives an undecodable byte, so every file says the
same thing about the same bad text and no write fails on it. XML 1.0 also refuses most
control characters and U+FFFE/U+FFFF: `xml_text` replaces those too."""

from __future__ import annotations

import json
import re
from typing import Any

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
# Everything XML 1.0 allows is \t \n \r, U+0020-U+D7FF, U+E000-U+FFFD and U+10000 up.
# Compiled when first used (JUnit exports only): the class is slow to compile.
_NOT_XML = "[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"


def clean_text(text: str) -> str:
    """`text` with every code point UTF-8 cannot hold replaced (a valid surrogate pair,
    as two code points, becomes the character it stands for)."""
    if text.isascii():          # O(1): CPython keeps the flag (most text runner writes is ASCII)
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    # UTF-16 joins a high and a low surrogate that meet; what stays alone is replaced.
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return _SURROGATE.sub(REPLACEMENT, joined)


def utf8(text: str) -> bytes:
    """The bytes runner writes for `text`: UTF-8, never an error."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return clean_text(text).encode("utf-8")


def _is_clean(value: Any) -> bool:
    """Whether every string in `value` is UTF-8-able: a walk that builds nothing (a result's
    strings are almost always fine, so most results need no copy)."""
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, str):
            if not current.isascii() and not _encodable(current):
                return False
        elif isinstance(current, dict):
            stack.extend(current)
            stack.extend(current.values())
        elif isinstance(current, (list, tuple)):
            stack.extend(current)
    return True


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _cleaned(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {_cleaned(k): _cleaned(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_cleaned(v) for v in value]
    return value


def clean_value(value: Any) -> Any:
    """A JSON-like value with every string (keys too) passed through `clean_text`: the value
    itself when nothing needs it (the usual case, checked without copying)."""
    return value if _is_clean(value) else _cleaned(value)


def dumps(value: Any) -> str:
    """Compact JSON (non-ASCII kept as is) that UTF-8 can always hold."""
    return clean_text(json.dumps(value, ensure_ascii=False, default=str))


def xml_text(text: str) -> str:
    """`text` with every character XML 1.0 refuses replaced."""
    return re.sub(_NOT_XML, REPLACEMENT, clean_text(text))      # re caches the compiled pattern
