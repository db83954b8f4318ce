"""The values steps give later steps and templates: a step's result (a mapping or a list),
the empty value of a result shape, and what a skipped step reads as (result_shapes.py makes
them). Runner builds every one of them from values that were already checked, so a template
that reads one finds nothing undefined inside (sandbox._defined does not walk them)."""

from __future__ import annotations

from typing import Any


class Result(dict[str, Any]):
    """A step's result (a mapping) as templates read it: `steps.X.skipped` is false."""

    skipped = False


class ResultList(list[Any]):
    """A step's result (a list) as templates read it; a step that makes LLM calls also tells
    how many (`steps.X.calls`, `steps.X.attempts`), as its mapping results do in their fields."""

    skipped = False
    calls = 0
    attempts = 0


class Empty(dict[str, Any]):
    """The empty value of an object: its known fields, each empty; false in a condition."""

    def __bool__(self) -> bool:
        return False


class Skipped(Empty):
    """What a skipped step reads as: the empty value of its result, `skipped` true."""

    skipped = True


class SkippedList(ResultList):
    """What a skipped step whose result is a list reads as: empty, `skipped` true."""

    skipped = True
