"""Which items a run takes: `--item N`, `--filter EXPR` (a bare expression over `item`) and
`--failed-from RUN` (the items that failed or errored there)."""

from __future__ import annotations

import contextlib
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from runner.engine.context import TEMPLATE_FAILURES, declared_env
from runner.engine.rates import pass_check
from runner.errors import InputError, RunnerError
from runner.inputs import Item, ItemStream, namespace_scope
from runner.pipeline.model import Pipeline
from runner.runs.folders import resolve_run, unfinished
from runner.runs.request import Selection
from runner.runs.results_file import results_in_order
from runner.templating.sandbox import Renderer, describe_error


def static_scope(pipeline: Pipeline) -> dict[str, Any]:
    """What an expression read outside a run sees: the params and the declared environment."""
    return {"params": pipeline.params, "env": declared_env(pipeline)}


def failed_items(pipeline: Pipeline, run: Path) -> Callable[[Item], bool]:
    """Whether an item errored in an earlier run, fails the pass rule as the pipeline says now, or
    has no result there because that run was interrupted over its whole input (what it never judged
    is still to judge). Items are matched by their content key (`item_key`), else (an older
    runner's results) by index: an output named `index` numbers results its own way. Results are
    read one at a time; an interrupted run's judged items are held as a number each."""
    folder = resolve_run(run)
    checked = pass_check(pipeline.summary, Renderer(pipeline.prompts_dir, read_only=True), static_scope(pipeline),
                         failures=())
    keys: set[str] = set()
    indexes: set[int] = set()
    # An interrupted run's judged items, each held as a number: its key (the number its 16 hex digits
    # write) with its index, so that of two items with one content only the judged one counts; with
    # an output numbering results its own way, how many results each key has (the first that many
    # items with it in the input were); and the index of a result without a key.
    by_position = isinstance(pipeline.output, dict) and "index" not in pipeline.output
    judged: set[int] | None = set() if unfinished(folder) else None
    counts: Counter[int] = Counter()
    keyless: set[int] = set()
    for result in results_in_order(folder):
        key = result.get("item_key") if isinstance(result.get("item_key"), str) else None
        if judged is not None:
            if not key:
                keyless.add(int(result["index"]))
            elif by_position:
                with contextlib.suppress(ValueError):
                    judged.add(int(key, 16) << 64 | int(result["index"]))
            else:
                with contextlib.suppress(ValueError):
                    counts[int(key, 16)] += 1
        if not result.get("error"):
            if checked is None:
                continue
            rule, meets = checked
            try:
                if meets(result):
                    continue
            except TEMPLATE_FAILURES as exc:
                raise RunnerError(f"--failed-from {run}: the pass rule {rule.describe()} does not apply "
                                  f"to its results: {describe_error(exc)}") from None
        if key:
            keys.add(key)
        else:
            indexes.add(int(result["index"]))

    seen: dict[int, list[int]] = {}       # by count: a judged key's items by index (the first `counts` were)

    def chosen(item: Item) -> bool:
        key = item.key
        if key in keys or item.index in indexes:
            return True
        if judged is None or item.index in keyless:
            return False
        number = int(key, 16)
        if by_position:
            return (number << 64 | item.index) not in judged
        if number not in counts:
            return True
        indexes_of = seen.setdefault(number, [])
        if item.index not in indexes_of:        # a stream is read again from its start: each index once
            indexes_of.append(item.index)
        return indexes_of.index(item.index) >= counts[number]      # an unjudged twin of a judged item

    return chosen


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
        return iter(items) if failed is None else filter(failed, items)

    def chosen_items() -> Iterator[Item]:
        chosen = unfiltered()
        if selection.filter:    # an item the expression cannot be evaluated on (a missing field) is not selected
            chosen = (item for item, held in _tested(pipeline, chosen, selection.filter) if held is True)
        return itertools.islice(chosen, limit) if limit else chosen

    if selection.filter:
        _check_filter(pipeline, unfiltered(), selection.filter)
    return ItemStream(chosen_items)


def _tested(pipeline: Pipeline, items: Iterable[Item], expression: str) -> Iterator[tuple[Item, bool | Exception]]:
    """Each item with whether the expression holds on it, or what stopped its evaluation there.
    The expression reads `item` (and its input's namespaces; a record not of their shape fails
    the filter, as a missing field does)."""
    renderer = Renderer(pipeline.prompts_dir, read_only=True)
    scope = static_scope(pipeline)
    namespaces = pipeline.input.namespaces
    for item in items:
        try:
            names = namespace_scope(item.value, namespaces) if namespaces else {}
        except InputError as exc:
            yield item, ValueError(str(exc))        # as a template failure
            continue
        try:
            yield item, renderer.condition(expression, {**scope, "item": item.value, **names})
        except TEMPLATE_FAILURES as exc:
            yield item, exc


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
