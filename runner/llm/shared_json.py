"""JSON text of what many calls send alike, made once per object.

A jury's seats send the very same messages, and every call of a step the same output
schema: each call's cache key and request body would otherwise encode those again (at 256
calls in flight, a tenth of the event loop's time went to JSON encoding). A text is kept
per object, the object with it, so its id cannot be reused while the text is kept; callers
never change an object they have sent (a re-ask builds a new message list)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

MAX_KEPT = 256          # objects whose text is kept; a step's calls reuse a handful at a time


class TextMemo:
    def __init__(self, encode: Callable[[Any], str]):
        self._encode = encode
        self._texts: dict[int, tuple[Any, str]] = {}

    def text(self, value: Any) -> str:
        known = self._texts.get(id(value))
        if known is None or known[0] is not value:
            if len(self._texts) >= MAX_KEPT:
                self._texts.clear()
            known = self._texts[id(value)] = (value, self._encode(value))
        return known[1]


def canonical(value: Any) -> str:
    """Sorted keys, no spaces, non-ASCII kept: the cache key's encoding."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


CANONICAL = TextMemo(canonical)
PLAIN = TextMemo(json.dumps)
BODY_SHARED = ("messages", "response_format")     # a request body's parts that calls share


def body_text(body: dict[str, Any]) -> str:
    """json.dumps(body), with the shared parts spliced in from PLAIN (moved last: key order
    carries no meaning in a JSON object; each part keeps its own order, so a schema's
    properties reach the server in the order the schema gives them)."""
    shared = [(name, body[name]) for name in BODY_SHARED if name in body]
    if not shared:
        return json.dumps(body)
    own = json.dumps({name: value for name, value in body.items() if name not in BODY_SHARED})
    spliced = ", ".join(f"{json.dumps(name)}: {PLAIN.text(value)}" for name, value in shared)
    return f"{own[:-1]}, {spliced}}}" if own != "{}" else f"{{{spliced}}}"
