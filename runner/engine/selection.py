"""Which items a run takes: `--item N`, `--filter EXPR` (a bare expression over `item`) and
`--failed-from RUN` (the items that failed or errored there)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.engine.context import TEMPLATE_FAILURES, declared_env
from runner.engine.rates import PassRule
from runner.errors import InputError, RunnerError
from runner.inputs import Item, ItemStream, namespace_scope
from runner.pipeline.model import Pipeline
from runner.runs.folders import resolve_run
from runner.runs.request import Selection
from runner.runs.results_file import results_in_order
from runner.templating.sandbox import Renderer, describe_error


def static_scope(pipeline: Pipeline) -> dict[str, Any]:
    """What an expression read outside a run sees: the params and the declared environment."""
    return {"params": pipeline.params, "env": declared_env(pipeline)}


def pass_check(pipeline: Pipeline, failures: tuple[type[BaseException], ...] = ()
               ) -> tuple[PassRule, Callable[[dict[str, Any]], bool | None]] | None:
    """The pipeline's pass rule and whether a result meets it, as the pipeline says now (None
    where `failures` are raised; other template failures propagate); None when it has none."""
    rule = PassRule.of(pipeline.summary)
    if rule is None:
        return None
    condition = Renderer(pipeline.prompts_dir, read_only=True).condition
    return rule, rule.checker(condition, static_scope(pipeline), failures)


@dataclass
class FailedItems:
    """The items of an earlier run that failed, by their content key (`item_key`), else (an older
    runner's results) by index: an output named `index` numbers results its own way."""

    keys: set[str] = field(default_factory=set)
    indexes: set[int] = field(default_factory=set)

    def __contains__(self, item: Item) -> bool:
        return item.key in self.keys or item.index in self.indexes


def failed_items(pipeline: Pipeline, run: Path) -> FailedItems:
    """Items of an earlier run that errored, or that fail the pass rule as the pipeline says now."""
    failed = FailedItems()
    for result in iter_failed(pipeline, run):
        key = result.get("item_key")
        if isinstance(key, str) and key:
            failed.keys.add(key)
        else:
            failed.indexes.add(int(result["index"]))
    return failed


def iter_failed(pipeline: Pipeline, run: Path) -> Iterator[dict[str, Any]]:
    """The failed items' results, read from the run's results one at a time."""
    results = results_in_order(resolve_run(run))
    checked = pass_check(pipeline)
    for result in results:
        if result.get("error"):
            yield result
        elif checked is not None:
            rule, meets = checked
            try:
                ok = meets(result)
            except TEMPLATE_FAILURES as exc:
                raise RunnerError(f"--failed-from {run}: the pass rule {rule.describe()} does not apply "
                                  f"to its results: {describe_error(exc)}") from None
            if not ok:
                yield result


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
    failed = failed_items(pipeline, selection.failed_from) if selection.failed_from is not None else None

    def unfiltered() -> Iterator[Item]:
        if failed is not None:
            return (item for item in items if item in failed)
        return iter(items)

    def chosen_items() -> Iterator[Item]:
        chosen = _filtered(pipeline, unfiltered(), selection.filter) if selection.filter else unfiltered()
        return itertools.islice(chosen, limit) if limit else chosen

    if selection.filter:
        _check_filter(pipeline, unfiltered(), selection.filter)
    return ItemStream(chosen_items)


def _tested(pipeline: Pipeline, items: Iterable[Item], expression: str) -> Iterator[tuple[Item, bool | Exception]]:
    """Each item with whether the expression holds on it, or what stopped its evaluation there."""
    renderer = Renderer(pipeline.prompts_dir, read_only=True)
    scope = static_scope(pipeline)
    for item in items:
        try:
            yield item, renderer.condition(expression, {**scope, **_item_names(pipeline, item)})
        except TEMPLATE_FAILURES as exc:
            yield item, exc


def _filtered(pipeline: Pipeline, items: Iterable[Item], expression: str) -> Iterator[Item]:
    """An item the expression cannot be evaluated on (a missing field) is not selected."""
    return (item for item, held in _tested(pipeline, items, expression) if held is True)


def _item_names(pipeline: Pipeline, item: Item) -> dict[str, Any]:
    """What the filter reads of an item: `item` (and its input's namespaces; a record not of
    their shape fails the filter, as a missing field does)."""
    namespaces = pipeline.input.namespaces
    try:
        return {"item": item.value, **(namespace_scope(item.value, namespaces) if namespaces else {})}
    except InputError as exc:
        raise ValueError(str(exc)) from None      # one of TEMPLATE_FAILURES


def _check_filter(pipeline: Pipeline, items: Iterable[Item], expression: str) -> None:
    """An expression that fails on every item is a mistake and says why (read until one passes)."""
    first_error: str | None = None
    for _, held in _tested(pipeline, items, expression):
        if held is True:
            return
        if isinstance(held, Exception):
            first_error = first_error or describe_error(held)
    if first_error is not None:
        raise InputError(f"--filter {expression!r}: {first_error}")
