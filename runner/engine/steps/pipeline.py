"""`pipeline`: run a part, another pipeline file's steps with typed inputs (runner/pipeline/parts.py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runner.checks.result_shapes import COUNTS, OPEN, ShapeContext, closed
from runner.engine.context import StepContext, render_at
from runner.engine.steps.base import Step, register
from runner.errors import ConfigError, StepError
from runner.pipeline.loader import load_part_file
from runner.pipeline.parts import input_problems, inputs_scope, load_part, rebased
from runner.templating.sandbox import is_template
from runner.yamlpos import Path as DataPath


def _project(shapes: ShapeContext) -> Path | None:
    return shapes.schemas_dir.parent if shapes.schemas_dir is not None else None


@register
class Part(Step):
    name = "pipeline"
    summary = "Run a part: a pipeline file's steps with typed `inputs:`; its result is the part's `output:` fields."
    render_args = False                 # `file` is literal; each input is rendered by run()
    counts_calls = True

    @classmethod
    def result_schema(cls, args: Mapping[str, Any], shapes: ShapeContext) -> dict[str, Any]:
        project, file = _project(shapes), args.get("file")
        if project is None or not isinstance(file, str) or is_template(file):
            return OPEN
        try:
            part = load_part(project, file, load_part_file)
        except ConfigError:
            return OPEN
        return closed({**dict.fromkeys(part.output, OPEN), **COUNTS}, "The part's `output:` fields.")

    @classmethod
    def static_problems(cls, args: Mapping[str, Any], shapes: ShapeContext) -> list[tuple[DataPath, str]]:
        project, file = _project(shapes), args.get("file")
        if not isinstance(file, str) or project is None:
            return []
        if is_template(file):
            return [(("file",), "a part is named as it is (a file under pipelines/), not by a template")]
        try:
            part = load_part(project, file, load_part_file)
        except ConfigError as exc:
            return [(("file",), f"part '{file}': {exc}")]
        return input_problems(part, file, args.get("inputs"))

    async def run(self, ctx: StepContext) -> Any:
        file = str(ctx.spec.args["file"])
        part = ctx.runtime.pipeline.parts.get(file)      # every part the pipeline runs, loaded with it
        if part is None:
            raise StepError(f"part '{file}' was not loaded with the pipeline")
        given = {name: ctx.render(value, "inputs", name) for name, value in (ctx.spec.args.get("inputs") or {}).items()}
        scope = {**ctx.runtime.base_scope(ctx.item), "params": part.params, "inputs": inputs_scope(part, given)}
        outcome = await ctx.run_steps(rebased(part.steps, ctx.spec.path), scope)
        if outcome.error:
            raise StepError(f"part '{file}': {outcome.error}")
        return {name: render_at(ctx.runtime, value, (*ctx.spec.path, "with", "file"), scope)
                for name, value in part.output.items()}
