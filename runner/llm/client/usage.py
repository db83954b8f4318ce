"""Token counts from a server's `usage`: whatever it sends, a count or unknown (0).

A server may send "12.5", [1], 1e400 or -3 where a count belongs; such a field is unknown
usage, never an error that would lose a good answer."""

from __future__ import annotations

import math
from typing import Any

USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")
MAX_TOKENS_COUNTED = 2**53          # past any real answer, and still exact as a float in JSON


def token_count(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value if 0 <= value <= MAX_TOKENS_COUNTED else 0
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and 0 <= value <= MAX_TOKENS_COUNTED else 0
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 16:
        return int(value)
    return 0


def usage_of(raw: Any, read: Any = None) -> dict[str, int]:
    """The three counts of a `usage` mapping (or of an object's attributes, with `read=getattr`)."""
    if read is not None:
        return {key: token_count(read(raw, key, 0)) for key in USAGE_KEYS}
    source = raw if isinstance(raw, dict) else {}
    return {key: token_count(source.get(key)) for key in USAGE_KEYS}
