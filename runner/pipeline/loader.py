"""Pipeline file -> validated, typed Pipeline, every problem reported at once: the file read and
composed (`extends:`, `defaults:`, `--set`, parts, plugins, probes, examples), then checked
against the pipeline schema and by runner/checks/ unless the run's `validated` marker knows it
as it is now. It knows nothing of what a step does beyond the StepInfo of its type.

`defaults: {llm: {on_error: default, default: {failed: true}}}` says a failure's handling once
per step type: each step of that type (at any depth) without its own `on_error` takes the
type's, and its `default` when its on_error is `default` and it gives none. They are written
into the steps after `extends:` and every `--set`, with the positions of the `defaults:` entry,
so the rest of runner sees ordinary steps and a wrong value is located there."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from runner.checks.checker import Checker
from runner.checks.json_schema import param_problems, pipeline_schema, schema_problems
from runner.errors import ConfigError, Problem, unknown
from runner.pipeline.examples import example_files, example_problems, with_examples
from runner.pipeline.extends import expand
from runner.pipeline.files import read_located
from runner.pipeline.model import InputSpec, MemoSpec, Pipeline, StepSpec, SummarySpec
from runner.pipeline.overrides import apply_overrides
from runner.pipeline.parts import loading, part_files, with_parts
from runner.pipeline.probes import probes_of, with_probe_file
from runner.pipeline.step_catalog import StepInfos, plugin_problems, resolve_plugin, walk_steps
from runner.pipeline.validated import ValidatedPipelines
from runner.yamlpos import Located, move_positions
from runner.yamlpos import Path as DataPath


def load_pipeline(path: str | Path, overrides: list[str] | None = None,
                  validated: ValidatedPipelines | None = None, project_dir: Path | None = None) -> Pipeline:
    """The typed pipeline, or ConfigError with every problem. With `validated` (runs and renders), a
    pipeline already found valid as it is now skips the checks. `project_dir`: the folder holding
    pipelines/, prompts/, schemas/ (default: the file's folder's parent; a part's is its caller's)."""
    file = Path(path)
    with loading(validated):
        project_dir = project_dir or file.resolve().parent.parent
        located, sources = expand(read_located(file), file, project_dir)
        sources += with_probe_file(located, project_dir)
        # A pipeline's plugins are code that may change what is valid without the pipeline
        # changing: such pipelines are checked every time.
        memo = validated if not located.data.get("plugins") else None
        infos = StepInfos()
        if overrides:
            apply_overrides(located, overrides, pipeline_schema(), infos)
        sources += part_files(project_dir, located.data.get("steps")) + example_files(located, project_dir)
        fingerprint = memo.fingerprint(located.data, file, project_dir, sources) if memo else ""
        if memo and memo.known(fingerprint):
            apply_defaults(located, infos)
            return _build(located, file, project_dir, sources)
        problems = schema_problems(located, located.data, pipeline_schema())
        if not problems:         # the plugins' step types, adapters and filters, before anything is checked
            problems = plugin_problems(located, project_dir)
        if not problems:         # then every step type is known: the failure defaults by type
            problems = apply_defaults(located, infos)
        if not problems:
            problems = Checker(located, infos, project_dir).run() + param_problems(located) \
                + example_problems(located, project_dir)
        if problems:
            raise ConfigError(problems)
        if memo:
            memo.remember(fingerprint)
        return _build(located, file, project_dir, sources)


def load_part_file(path: Path, project_dir: Path, validated: ValidatedPipelines | None) -> Pipeline:
    """A part file (runner/pipeline/parts.py), read and checked with its caller's project and
    validated marker."""
    return load_pipeline(path, project_dir=project_dir, validated=validated)


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
        for key in ("on_error", "default"):
            if key not in step and key in given and (key == "on_error" or step.get("on_error") == "default"):
                step[key] = copy.deepcopy(given[key])
                move_positions(located, ("defaults", step["uses"], key), (*path, key), copy=True)
    return problems


def _build(located: Located, file: Path, project_dir: Path, sources: list[Path]) -> Pipeline:
    data = located.data
    models, env_names, parts = with_parts(project_dir, data["steps"], data.get("models", {}),
                                          tuple(data.get("env", [])), load_part_file)
    return Pipeline(
        name=data["name"], description=data.get("description", ""), file=file, project_dir=project_dir,
        env_names=env_names, input=InputSpec.of(data.get("input")), params=data.get("params", {}), models=models,
        steps=tuple(_step_specs(list(data["steps"]), ("steps",), located, project_dir)),
        output=data.get("output", {}), output_base=data.get("output_base"),
        summary=SummarySpec.of(data.get("summary")), memo=MemoSpec.of(data.get("memo")),
        concurrency=data.get("concurrency"), located=located, tracing=data.get("tracing"), sources=tuple(sources),
        plugins=tuple(resolve_plugin(entry, project_dir) for entry in data.get("plugins") or []),
        probes=probes_of(data), parts=parts)


def _step_specs(steps: list[dict[str, Any]], base: DataPath, located: Located, project_dir: Path) -> Iterator[StepSpec]:
    """Each step typed, its `examples:` file read (the engine never reads it)."""
    for i, step in enumerate(steps):
        args = with_examples(step["uses"], step.get("with", {}) or {}, (*base, i), located, project_dir)
        nested: list[dict[str, Any]] = args["steps"] if isinstance(args.get("steps"), list) else []
        yield StepSpec(id=step["id"], uses=step["uses"], args=args, path=(*base, i),
                       condition=step.get("if"), on_error=step.get("on_error", "fail"),
                       default=step.get("default"),
                       substeps=tuple(_step_specs(nested, (*base, i, "with", "steps"), located, project_dir)))
