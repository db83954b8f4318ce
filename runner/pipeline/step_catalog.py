"""The catalog of step types as the loader sees them: names, `with:` schemas, what their
`with:` keys name, and the shapes of their results. Step types register here (their
modules live in runner/engine/steps/); a lookup by name imports the module named like the
entry, so the loader checks steps without importing any step logic of its own."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from runner.checks.result_shapes import OPEN, ShapeContext
from runner.errors import RunnerError
from runner.registry import Registry
from runner.yamlpos import Path as DataPath


@dataclass(frozen=True)
class StepInfo:
    """What the loader may know about a step type without importing its logic."""

    name: str
    schema: dict[str, Any]
    template_fields: tuple[str, ...] = ()
    model_fields: tuple[str, ...] = ()
    schema_fields: tuple[str, ...] = ()
    substeps: bool = False
    sub_scope: tuple[str, ...] = ()
    own_scope: tuple[str, ...] = ()
    lazy_fields: tuple[str, ...] = ()     # of a step with sub-steps: fields rendered in the sub-steps' scope
    summary: str = ""
    result_schema: Callable[[Mapping[str, Any], ShapeContext], dict[str, Any]] = lambda args, shapes: OPEN
    static_problems: Callable[[Mapping[str, Any], ShapeContext], list[tuple[DataPath, str]]] = \
        lambda args, shapes: []


# A step type is its module of runner/engine/steps (a Step subclass decorated with @register, whose
# class attributes StepInfo copies) plus runner/schemas/steps/<name>.schema.json; a lookup by name
# imports that module first.
# Installed packages add theirs through the entry point group `runner.steps` (name -> Step subclass).
STEPS: Registry[type[Any]] = Registry("step type", "runner.engine.steps", "runner.steps")


@cache
def step_schema(name: str) -> dict[str, Any]:
    from runner.checks.json_schema import read_schema
    return read_schema("steps", f"{name}.schema.json")


def step_info(name: str) -> StepInfo:
    """What the loader knows of step type `name`: a built-in's `with:` schema is package data, a
    plugin's is its class's `schema`."""
    cls = STEPS.get(name)
    schema = getattr(cls, "schema", None)
    return StepInfo(schema=schema if schema is not None else step_schema(cls.name),
                    **{f.name: getattr(cls, f.name) for f in dataclasses.fields(StepInfo) if f.name != "schema"})


def step_names() -> list[str]:
    return STEPS.names()


def walk_steps(steps: Any, base: DataPath = ("steps",)) -> Iterator[tuple[DataPath, dict[str, Any]]]:
    """(path, step) of every step mapping of a pipeline's data, sub-steps (`with.steps`) after
    their step, before its schema is checked: anything that is not a mapping is passed over."""
    for index, step in enumerate(steps if isinstance(steps, list) else []):
        if isinstance(step, dict):
            yield (*base, index), step
            if isinstance(step.get("with"), dict):
                yield from walk_steps(step["with"].get("steps"), (*base, index, "with", "steps"))


class StepInfos(Mapping[str, StepInfo]):
    """Every registered step type's StepInfo, each read when it is first looked up: checking a
    pipeline imports the step types it names and what they import, not all of them (a run of a
    pipeline already found valid asks for none); listing them, as an unknown name's message
    does, reads them all. One per load, as plugins register step types as they are imported."""

    def __init__(self) -> None:
        self._read: dict[str, StepInfo] = {}

    def __getitem__(self, name: str) -> StepInfo:
        if not isinstance(name, str):
            raise KeyError(name)
        if name not in self._read:
            try:
                self._read[name] = step_info(name)
            except RunnerError:           # no such step type
                raise KeyError(name) from None
        return self._read[name]

    def __iter__(self) -> Iterator[str]:
        return iter(step_names())

    def __len__(self) -> int:
        return len(step_names())
