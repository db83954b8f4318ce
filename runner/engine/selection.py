"""Which items a run takes: `--item N`, `--filter EXPR` (a bare expression over `item`) and
`--failed-from RUN` (the items that failed or errored there)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.engine.context import TEMPLATE_FAILURES
from runner.errors import InputError, RunnerError
from runner.inputs import Item
from runner.pipeline.model import Pipeline
from runner.pipeline.templating import Renderer, describe_error
from runner.stores.runs import RESULTS, resolve_run


@dataclass
class Selection:
    item: int | None = None
    filter: str | None = None
    failed_from: Path | None = None

    @property
    def empty(self) -> bool:
        return self.item is None and not self.filter and self.failed_from is None


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
    folder = resolve_run(run)
    try:
        results = [json.loads(line) for line in (folder / RESULTS).read_text(encoding="utf-8").splitlines() if line]
    except (OSError, ValueError) as exc:
        raise RunnerError(f"--failed-from {run}: cannot read {folder / RESULTS} ({exc})") from None
    rule = item_rule(pipeline)
    renderer = Renderer(pipeline.prompts_dir)
    scope = _scope(pipeline)
    failed = set()
    for result in results:
        if result.get("error"):
            failed.add(int(result["index"]))
        elif rule is not None:
            try:
                ok = renderer.condition(rule[1], {**scope, "result": result})
            except TEMPLATE_FAILURES as exc:
                raise RunnerError(f"--failed-from {run}: the pass rule {rule[0]} ({rule[1]}) does not apply "
                                  f"to its results: {describe_error(exc)}") from None
            if not ok:
                failed.add(int(result["index"]))
    return failed


def select(pipeline: Pipeline, items: list[Item], selection: Selection) -> list[Item]:
    if selection.empty:
        return items
    chosen = items
    if selection.item is not None:
        chosen = [i for i in chosen if i.index == selection.item]
        if not chosen:
            raise InputError(f"--item {selection.item}: the input has {len(items)} item(s)")
    if selection.failed_from is not None:
        failed = failed_indexes(pipeline, selection.failed_from)
        chosen = [i for i in chosen if i.index in failed]
    if selection.filter:
        chosen = _filtered(pipeline, chosen, selection.filter)
    return chosen


def _filtered(pipeline: Pipeline, items: list[Item], expression: str) -> list[Item]:
    """An item the expression cannot be evaluated on (a missing field) is not selected; an
    expression that fails on every item is a mistake and says why."""
    renderer = Renderer(pipeline.prompts_dir)
    scope = _scope(pipeline)
    kept: list[Item] = []
    first_error: str | None = None
    for item in items:
        try:
            if renderer.condition(expression, {**scope, "item": item.value}):
                kept.append(item)
        except TEMPLATE_FAILURES as exc:
            first_error = first_error or describe_error(exc)
    if not kept and first_error is not None:
        raise InputError(f"--filter {expression!r}: {first_error}")
    return kept
