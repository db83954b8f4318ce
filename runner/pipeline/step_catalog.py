"""The catalog of step types as the loader sees them: names, `with:` schemas, what their
`with:` keys name, and the shapes of their results. Step types register here (their
modules live in runner/engine/steps/); a lookup by name imports the module named like the
entry, so the loader checks steps without importing any step logic of its own.

`plugins:`: the Python modules a pipeline names, whose step types, input adapters and
filters it uses. An entry is an importable module name (`my_judges.steps`) or a `.py` file
named relative to the project folder (the folder holding pipelines/), which must stay inside
it (`plugins/scoring.py`). Nothing else is imported: a file plugin's folder is not put on the
import path, and no folder is searched for code the pipeline did not name.

A module registers what it brings as the built-ins do: `@register` on a Step subclass
(runner.engine.steps.base; its `schema` is its `with:` schema), `@adapter("name")` on an input
adapter (runner.inputs) and `@template_filter("name")` on a filter
(runner.templating.filters). Installed packages may instead register through entry points
(runner/registry.py): they need no `plugins:` entry.

The loader imports the plugins before it checks the pipeline; every run's Runtime imports
them again where it runs (a worker process or a Ray worker starts without them)."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from runner.checks.result_shapes import OPEN, ShapeContext
from runner.errors import Problem, RunnerError
from runner.paths import OK, refusal, resolve_inside
from runner.registry import Registry
from runner.yamlpos import Located
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


# ---- plugins ------------------------------------------------------------------------------

MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def resolve_plugin(entry: str, project_dir: Path) -> str:
    """The module name as written, or the file's real path (RunnerError saying why it cannot be one)."""
    if not entry.endswith(".py") and MODULE_NAME.match(entry):
        return entry
    if not entry.endswith(".py"):
        raise RunnerError(f"'{entry}' is neither a module name (my_package.steps) nor a .py file")
    found, status = resolve_inside(project_dir, entry)
    if found is None or status != OK:
        raise RunnerError(refusal(status, entry, project_dir, "project"))
    return str(found)


def import_plugin(spec: str) -> None:
    """Import a resolved plugin (a module name, or a file's real path) once per process."""
    if not spec.endswith(".py"):
        try:
            importlib.import_module(spec)
        except ModuleNotFoundError as exc:
            if exc.name and (spec == exc.name or spec.startswith(exc.name + ".")):
                raise RunnerError(f"no module named '{spec}' (install its package, or name a .py file inside "
                                  f"the project)") from None
            raise
        return
    name = f"runner_plugin_{Path(spec).stem}_{hashlib.sha256(spec.encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return
    found = importlib.util.spec_from_file_location(name, spec)
    if found is None or found.loader is None:
        raise RunnerError(f"{spec}: cannot be imported as a module")
    module = importlib.util.module_from_spec(found)
    sys.modules[name] = module
    try:
        found.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise


def load_plugins(specs: Iterable[str]) -> None:
    """Import resolved plugins (a Runtime does, in every process a run uses), after every
    built-in, so that a plugin taking a built-in's name is refused here."""
    from runner.inputs import ADAPTERS
    STEPS.load_builtins()
    ADAPTERS.load_builtins()
    for spec in specs:
        try:
            import_plugin(spec)
        except RunnerError:
            raise
        except Exception as exc:        # the plugin's own code failed
            raise RunnerError(f"plugin {spec}: importing it failed: {type(exc).__name__}: {exc}") from None


def plugin_problems(located: Located, project_dir: Path) -> list[Problem]:
    """Import each plugin the pipeline names; each one that cannot be, located at its entry."""
    problems = []
    for index, entry in enumerate(located.data.get("plugins") or []):
        try:
            load_plugins([resolve_plugin(entry, project_dir)])
        except RunnerError as exc:
            problems.append(located.problem(("plugins", index), f"plugin '{entry}': {exc}"))
    return problems
