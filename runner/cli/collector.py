"""How the `runner` process collects garbage: not while a command imports, rarely after.

A run holds tens of thousands of objects at once (items in flight, their scopes, requests),
and Python's collector walks them each time 700 more have been made: 300 times in a cold
3,600-call citation judge, 4-5% of its CPU. What runner makes is freed by reference counting
almost always; the rare cycle waits a little longer (YOUNGEST_GENERATION).

A command's imports make 100,000 long-lived objects and no garbage: walking them cost one
15 ms collection in every `runner run`, and every later full collection walked them again.
So nothing is collected while a command imports, and the `runner` process then freezes what
the imports made (never walked again). A process that only imports runner (a test, a
library user) is not frozen: it may hold garbage of its own."""

from __future__ import annotations

import gc

WHILE_IMPORTING = 1_000_000
YOUNGEST_GENERATION = 50_000
_freeze = False


def importing() -> None:
    gc.set_threshold(WHILE_IMPORTING)


def own_process() -> None:
    """The `runner` command started this process: its imports may be frozen."""
    global _freeze
    _freeze = True


def imports_done() -> None:
    """The command has imported what it needs: collect as a run needs from here on."""
    if _freeze:
        gc.freeze()
    gc.set_threshold(YOUNGEST_GENERATION)
