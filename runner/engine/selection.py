"""Which items a run takes: `--item N`, `--filter EXPR` (a bare expression over `item`) and
`--failed-from RUN` (the items that failed or errored there)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from runner.engine.context import TEMPLATE_FAILURES
from runner.errors import InputError, RunnerError
from runner.inputs import Item
from runner.inputs.stream import ItemStream
from runner.pipeline.model import Pipeline
from runner.pipeline.templating import Renderer, describe_error
from runner.runs.folders import resolve_run
from runner.runs.request import Selection
from runner.runs.results_file import results_in_order


def pass_rule(pipeline: Pipeline) -> tuple[str, str] | None:
    """(name, expression) of the pipeline's first summary rate: what an item must meet to pass."""
    for name, expression in (pipeline.summary.get("rates") or {}).items():
        return str(name), str(expression)
    return None


def item_rule(pipeline: Pipeline) -> tuple[str, str] | None:
    """(name, expression) an item must meet to pass: `summary.pass_when` (slide_judge: not red),
    else the first summary rate."""
    declared = pipeline.summary.get("pass_when")
    return ("pass_when", str(declared)) if declared else pass_rule(pipeline)


def _scope(pipeline: Pipeline) -> dict[str, Any]:
    env = {name: os.environ[name] for name in pipeline.env_names if name in os.environ}
    return {"params": pipeline.params, "env": env}


def failed_indexes(pipeline: Pipeline, run: Path) -> set[int]:
    """Items of an earlier run that errored, or that fail the pass rule as the pipeline says now."""
    return set(iter_failed(pipeline, run))


def iter_failed(pipeline: Pipeline, run: Path) -> Iterator[int]:
    """The failed items' indexes in increasing order, read from the run's results one at a time."""
    results = results_in_order(resolve_run(run))
    rule = item_rule(pipeline)
    renderer = Renderer(pipeline.prompts_dir, read_only=True)
    scope = _scope(pipeline)
    for result in results:
        if result.get("error"):
            yield int(result["index"])
        elif rule is not None:
            try:
                ok = renderer.condition(rule[1], {**scope, "result": result})
            except TEMPLATE_FAILURES as exc:
                raise RunnerError(f"--failed-from {run}: the pass rule {rule[0]} ({rule[1]}) does not apply "
                                  f"to its results: {describe_error(exc)}") from None
            if not ok:
                yield int(result["index"])


def select(pipeline: Pipeline, items: ItemStream, selection: Selection, limit: int | None = None) -> ItemStream:
    """The selected items, as a stream: mistakes (an --item past the end, a filter that fails on
    every item, a run whose results the pass rule cannot read) are found before it is returned."""
    if selection.item is not None:
        chosen = [i for i in items if i.index == selection.item]
        if not chosen:
            raise InputError(f"--item {selection.item}: the input has {len(items)} item(s)")
        items = ItemStream.of(chosen)
    if selection.failed_from is None and not selection.filter and not limit:
        return items                    # the same stream: its count is not taken twice
    if selection.failed_from is not None:
        for _ in iter_failed(pipeline, selection.failed_from):    # read once now: a bad run fails here
            pass

    def unfiltered() -> Iterator[Item]:
        if selection.failed_from is not None:
            return _among(iter(items), iter_failed(pipeline, selection.failed_from))
        return iter(items)

    def chosen_items() -> Iterator[Item]:
        chosen = _filtered(pipeline, unfiltered(), selection.filter) if selection.filter else unfiltered()
        return itertools.islice(chosen, limit) if limit else chosen

    if selection.filter:
        _check_filter(pipeline, unfiltered(), selection.filter)
    return ItemStream(chosen_items)


def _among(items: Iterable[Item], indexes: Iterator[int]) -> Iterator[Item]:
    """The items whose index is in `indexes` (both in increasing order: a merge, nothing held)."""
    wanted = next(indexes, None)
    for item in items:
        while wanted is not None and wanted < item.index:
            wanted = next(indexes, None)
        if wanted is None:
            return
        if wanted == item.index:
            yield item


def _filtered(pipeline: Pipeline, items: Iterable[Item], expression: str) -> Iterator[Item]:
    """An item the expression cannot be evaluated on (a missing field) is not selected."""
    renderer = Renderer(pipeline.prompts_dir, read_only=True)
    scope = _scope(pipeline)
    for item in items:
        try:
            if renderer.condition(expression, {**scope, "item": item.value}):
                yield item
        except TEMPLATE_FAILURES:
            continue


def _check_filter(pipeline: Pipeline, items: Iterable[Item], expression: str) -> None:
    """An expression that fails on every item is a mistake and says why (read until one passes)."""
    renderer = Renderer(pipeline.prompts_dir, read_only=True)
    scope = _scope(pipeline)
    first_error: str | None = None
    for item in items:
        try:
            if renderer.condition(expression, {**scope, "item": item.value}):
                return
        except TEMPLATE_FAILURES as exc:
            first_error = first_error or describe_error(exc)
    if first_error is not None:
        raise InputError(f"--filter {expression!r}: {first_error}")
