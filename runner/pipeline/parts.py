"""Parts: a pipeline file another pipeline runs as one step (`uses: pipeline`).

A part is a pipeline file under the project's `pipelines/` that declares typed `inputs:`
(`{NAME: {type: ..., description: ..., default: ...}}`; one without `default` is required),
reads them as `inputs.NAME` and gives its `output:` fields as its result. The calling step
passes `with: {file: parts/x.yaml, inputs: {...}}`; `runner validate` checks the part (located
in its own file) and the inputs the step passes. A part that runs itself is refused with the chain.

One outermost load (`loading`) reads and checks each part it reaches once, however many steps
run it; the Pipeline keeps them (`parts`), so a run never loads one again."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

import runner.templating.sandbox as templating
from runner.errors import ConfigError, Problem, did_you_mean
from runner.paths import resolve_inside
from runner.pipeline.model import Pipeline, StepSpec
from runner.pipeline.step_catalog import walk_steps
from runner.yamlpos import Path as DataPath

if TYPE_CHECKING:
    from runner.pipeline.validated import ValidatedPipelines

# The loader's load_pipeline (given by its callers: the loader imports this module):
# (file, project_dir, the caller's validated marker) -> Pipeline.
Load = Callable[[Path, Path, "ValidatedPipelines | None"], Pipeline]


@dataclasses.dataclass
class _Load:
    """One outermost pipeline load, as its parts see it."""
    validated: ValidatedPipelines | None
    chain: list[Path] = dataclasses.field(default_factory=list)     # the parts being loaded, outermost first
    loaded: dict[Path, Pipeline] = dataclasses.field(default_factory=dict)


_CURRENT: ContextVar[_Load | None] = ContextVar("runner_parts_load", default=None)


@contextmanager
def loading(validated: ValidatedPipelines | None) -> Iterator[_Load]:
    """The outermost pipeline load, around everything it reads (a nested load joins it):
    each part is loaded once in it, and with the caller's validated marker."""
    current = _CURRENT.get()
    if current is not None:
        yield current
        return
    current = _Load(validated)
    token = _CURRENT.set(current)
    try:
        yield current
    finally:
        _CURRENT.reset(token)


def load_part(project_dir: Path, file: str, load: Load) -> Pipeline:
    """The part `file` (under pipelines/), checked; ConfigError saying what is wrong."""
    path, status = resolve_inside(project_dir / "pipelines", file)
    if path is None:
        raise ConfigError([Problem(f"pipelines/{file}", "", f"{status}: no such part file under pipelines/")])
    with loading(None) as current:
        if path in current.loaded:
            return current.loaded[path]
        if path in current.chain:
            chain = " -> ".join(p.name for p in [*current.chain[current.chain.index(path):], path])
            raise ConfigError([Problem(f"pipelines/{file}", "", f"the part runs itself: {chain}")])
        current.chain.append(path)
        try:
            part = current.loaded[path] = load(path, project_dir, current.validated)
        finally:
            current.chain.pop()
        return part


def input_problems(part: Pipeline, file: str, given: Any) -> list[tuple[DataPath, str]]:
    """What is wrong with the `inputs:` a step passes to `part`: (path under `with`, message)."""
    from runner.checks.json_schema import first_error, schema_message
    declared: dict[str, dict[str, Any]] = part.located.data.get("inputs", {})      # the schema made them mappings
    given = given or {}
    problems: list[tuple[DataPath, str]] = []
    for name, value in given.items():
        if name not in declared:
            hint = did_you_mean(name, declared)
            problems.append((("inputs", name), f"part '{file}' has no input '{name}'."
                             + (hint or f" Its inputs: {', '.join(declared) or 'none'}.")))
            continue
        schema = {k: v for k, v in declared[name].items() if k != "default"}
        if not templating.is_template(value):
            error = first_error(schema, value)
            if error is not None:
                problems.append((("inputs", name), f"input '{name}' of part '{file}': {schema_message(error)}"))
    for name, spec in declared.items():
        if name not in given and "default" not in spec:
            problems.append((("inputs",), f"part '{file}' needs input '{name}'"))
    return problems


def inputs_scope(part: Pipeline, given: dict[str, Any]) -> dict[str, Any]:
    """`inputs` as the part's templates read it: each declared input, given or its default."""
    return {name: given[name] if name in given else spec.get("default")
            for name, spec in part.located.data.get("inputs", {}).items()}


def rebased(specs: tuple[StepSpec, ...], base: DataPath) -> tuple[StepSpec, ...]:
    """A part's steps placed under the calling step's path (`base`), so each step of the run
    keeps a place of its own and a message about one points at the step that runs the part."""
    return tuple(dataclasses.replace(spec, path=(*base, *spec.path), substeps=rebased(spec.substeps, base))
                 for spec in specs)


def parts_used(steps: Any) -> list[str]:
    """The part files the steps run (`uses: pipeline`), at any depth, each once."""
    return list(dict.fromkeys(step["with"]["file"] for _, step in walk_steps(steps) if step.get("uses") == "pipeline"
                              and isinstance(step.get("with"), dict) and isinstance(step["with"].get("file"), str)))


def part_files(project_dir: Path, steps: Any) -> list[Path]:
    """The files of the parts the steps run (those that exist): a pipeline is made of them too
    (run.json lists them with their hashes; a change to one is a change to the pipeline)."""
    found = (resolve_inside(project_dir / "pipelines", file)[0] for file in parts_used(steps))
    return [path for path in found if path is not None]


def with_parts(project_dir: Path, steps: Any, models: dict[str, Any], env_names: tuple[str, ...], load: Load
               ) -> tuple[dict[str, Any], tuple[str, ...], dict[str, Pipeline]]:
    """A pipeline's models and env names with those of the parts it runs added (a part's
    model is run's model of that name: the caller's wins when both name one), and the parts
    it runs at any depth, by file: those of its parts' parts too."""
    merged, names, parts = dict(models), list(env_names), {}
    for file in parts_used(steps):
        part = parts[file] = load_part(project_dir, file, load)
        merged = {**part.models, **merged}
        names += [name for name in part.env_names if name not in names]
        parts = {**part.parts, **parts}
    return merged, tuple(names), parts
