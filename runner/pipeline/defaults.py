"""Failure defaults said once per step type: `defaults: {llm: {on_error: default, default: {failed: true}}}`.

Each step of a type named under `defaults:` that does not say its own `on_error` takes the
type's, and its `default` when its on_error is `default` and it gives none, at any depth
(sub-steps of foreach and loop too). The values are written into the steps as soon as the
pipeline is read (after its `extends:` chain and every `--set`), with the positions of the
`defaults:` entry, so the rest of runner sees ordinary steps and a wrong value is located there."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from runner.errors import Problem, unknown
from runner.pipeline.step_catalog import walk_steps
from runner.yamlpos import Located
from runner.yamlpos import Path as DataPath


def apply_defaults(located: Located, step_types: Iterable[str]) -> list[Problem]:
    """Write `defaults:` into the steps of `located`; a problem for a type no step can have."""
    data = located.data
    defaults = data.get("defaults")         # checked by the pipeline schema before this runs
    if not defaults:
        return []
    known = set(step_types)
    problems = [located.problem(("defaults", name), unknown("step type", name, known), key=True)
                for name in defaults if name not in known]
    for path, step in walk_steps(data.get("steps")):
        given = defaults.get(str(step.get("uses")), {})
        if "on_error" not in step and "on_error" in given:
            _take(located, step, given, "on_error", path)
        if "default" not in step and "default" in given and step.get("on_error") == "default":
            _take(located, step, given, "default", path)
    return problems


def _take(located: Located, step: dict[str, Any], given: dict[str, Any], key: str, path: DataPath) -> None:
    """`defaults:`'s `key` written into the step, every position at or below it copied along."""
    step[key] = copy.deepcopy(given[key])
    source, target = ("defaults", step["uses"], key), (*path, key)
    tables: list[dict[DataPath, Any]] = [located.value_pos, located.key_pos, located.origins]
    for table in tables:
        for at, where in [(p, w) for p, w in table.items() if p[:len(source)] == source]:
            table[(*target, *at[len(source):])] = where
