"""`runner validate`'s warning about numeric votes that can be null.

A `mean`, `median`, `min` or `max` jury with no number to combine (no juror answered, or
fewer than its quorum) errors the item with the jurors' own causes; under `on_error:
continue` it yields its result instead, with the vote null. An expression that then compares
that vote (`steps.jury.score >= 0.5`) raises a TypeError on exactly those items. Such a
comparison is handled when the same expression tests the vote (`is none`, `is not none`,
`is number`, `| default(...)`) or the jury's `decided`/`error`; otherwise validate warns,
at the expression."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from runner.pipeline.model import Pipeline, StepSpec
from runner.yamlpos import Path as DataPath

NUMERIC = ("mean", "median", "min", "max")
COMPARED = r"(?:>=|<=|==|!=|<|>|[-+*/%])"


def null_vote_warnings(pipeline: Pipeline) -> list[str]:
    """One line per expression that compares a vote that can be null without handling it."""
    warnings: list[str] = []
    nullable = [(step, step.args["vote"]["field"], step.args["vote"].get("method"))
                for step in _all_steps(pipeline.steps) if _keeps_a_null_vote(step)]
    for path, text in _expressions(pipeline):
        for step, field, method in nullable:
            vote = rf"steps\.{re.escape(step.id)}\.{re.escape(field)}\b"
            compared = re.search(rf"{vote}\s*{COMPARED}|{COMPARED}\s*{vote}", text)
            if compared and not _handled(text, step.id, vote):
                warnings.append(f"{pipeline.where(path)}: steps.{step.id}.{field} can be null (a {method} vote no "
                                f"juror answered, kept by on_error: continue) and is compared without handling "
                                f"it; test `steps.{step.id}.{field} is not none` first")
    return warnings


def _keeps_a_null_vote(step: StepSpec) -> bool:
    """A jury's `vote` (an object with a `field`) is checked by its schema before this runs."""
    return step.uses == "jury" and step.args["vote"].get("method") in NUMERIC and step.on_error == "continue"


def _handled(text: str, step_id: str, vote: str) -> bool:
    return bool(re.search(rf"{vote}\s*(?:is\s+(?:not\s+)?(?:none|number|defined)|\|\s*default)", text)
                or re.search(rf"steps\.{re.escape(step_id)}\.(?:decided|error)\b", text))


def _all_steps(steps: tuple[StepSpec, ...]) -> Iterator[StepSpec]:
    for step in steps:
        yield step
        yield from _all_steps(step.substeps)


def _expressions(pipeline: Pipeline) -> Iterator[tuple[DataPath, str]]:
    """Every string of the steps, output and summary, with its place in the file."""
    for step in _all_steps(pipeline.steps):
        yield from _strings(step.condition, (*step.path, "if"))
        yield from _strings(step.args, (*step.path, "with"))
    yield from _strings(pipeline.output, ("output",))
    yield from _strings(pipeline.located.data.get("summary"), ("summary",))


def _strings(value: Any, path: DataPath) -> Iterator[tuple[DataPath, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, inner in value.items():
            if key != "steps":                  # sub-steps are walked as steps
                yield from _strings(inner, (*path, key))
    elif isinstance(value, list):
        for number, inner in enumerate(value):
            yield from _strings(inner, (*path, number))
