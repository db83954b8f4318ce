"""JSON text of what many calls send alike, made once per object.

A jury's seats send the very same messages, and every call of a step the same output
schema: each call's cache key and request body would otherwise encode those again (at 256
calls in flight, a twentieth of the event loop's time went to JSON encoding). A value is
kept per object, the object with it, so its id cannot be reused while the value is kept;
callers never change an object they have sent (a re-ask builds a new message list)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Generic, TypeVar

MAX_KEPT = 256          # objects whose value is kept; a step's calls reuse a handful at a time
T = TypeVar("T")


class IdentityMemo(Generic[T]):
    """`make(obj)`, made once per object (not per equal value)."""

    def __init__(self, make: Callable[[Any], T]):
        self._make = make
        self._made: dict[int, tuple[Any, T]] = {}

    def __call__(self, obj: Any) -> T:
        known = self._made.get(id(obj))
        if known is None or known[0] is not obj:
            if len(self._made) >= MAX_KEPT:
                self._made.clear()
            known = self._made[id(obj)] = (obj, self._make(obj))
        return known[1]


def canonical(value: Any) -> str:
    """Sorted keys, no spaces, non-ASCII kept: the cache key's encoding."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


CANONICAL: IdentityMemo[str] = IdentityMemo(canonical)
PLAIN: IdentityMemo[str] = IdentityMemo(json.dumps)
BODY_SHARED = ("messages", "response_format")     # a request body's parts that calls share


def body_text(body: dict[str, Any]) -> str:
    """json.dumps(body), with the shared parts spliced in from PLAIN (moved last: key order
    carries no meaning in a JSON object; each part keeps its own order, so a schema's
    properties reach the server in the order the schema gives them)."""
    shared = [(name, body[name]) for name in BODY_SHARED if name in body]
    if not shared:
        return json.dumps(body)
    own = json.dumps({name: value for name, value in body.items() if name not in BODY_SHARED})
    spliced = ", ".join(f"{json.dumps(name)}: {PLAIN(value)}" for name, value in shared)
    return f"{own[:-1]}, {spliced}}}" if own != "{}" else f"{{{spliced}}}"
