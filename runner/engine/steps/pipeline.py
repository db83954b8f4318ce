"""`pipeline`: run a part, another pipeline file's steps with typed inputs (runner/pipeline/parts.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.checks.result_shapes import COUNTS, OPEN, ShapeContext, closed
from runner.engine.context import StepContext, render_at
from runner.engine.steps.base import Step, register
from runner.errors import ConfigError, StepError
from runner.pipeline.loader import load_part_file
from runner.pipeline.model import Pipeline
from runner.pipeline.parts import input_problems, inputs_scope, load_part, rebased
from runner.templating.sandbox import is_template
from runner.yamlpos import Path as DataPath


@register
class Part(Step):
    name = "pipeline"
    summary = "Run a part: a pipeline file's steps with typed `inputs:`; its result is the part's `output:` fields."
    render_args = False                 # `file` is literal; each input is rendered by run()
    counts_calls = True

    @classmethod
    def result_schema(cls, args: Mapping[str, Any], shapes: ShapeContext) -> dict[str, Any]:
        part, _ = _part(args, shapes)
        if part is None:
            return OPEN
        return closed({**dict.fromkeys(part.output, OPEN), **COUNTS}, "The part's `output:` fields.")

    @classmethod
    def static_problems(cls, args: Mapping[str, Any], shapes: ShapeContext) -> list[tuple[DataPath, str]]:
        part, problems = _part(args, shapes)
        return problems if part is None else input_problems(part, args["file"], args.get("inputs"))

    async def run(self, ctx: StepContext) -> Any:
        file = str(ctx.spec.args["file"])
        part = ctx.runtime.pipeline.parts[file]      # every part the pipeline runs is loaded with it
        given = {name: ctx.render(value, "inputs", name) for name, value in (ctx.spec.args.get("inputs") or {}).items()}
        scope = {**ctx.runtime.base_scope(ctx.item), "params": part.params, "inputs": inputs_scope(part, given)}
        outcome = await ctx.run_steps(rebased(part.steps, ctx.spec.path), scope)
        if outcome.error:
            raise StepError(f"part '{file}': {outcome.error}")
        return {name: render_at(ctx.runtime, value, (*ctx.spec.path, "with", "file"), scope)
                for name, value in part.output.items()}


def _part(args: Mapping[str, Any], shapes: ShapeContext) -> tuple[Pipeline | None, list[tuple[DataPath, str]]]:
    """The part `file` names, or what keeps it from being read (nothing without a project folder)."""
    file = args.get("file")
    if not isinstance(file, str) or shapes.schemas_dir is None:
        return None, []
    if is_template(file):
        return None, [(("file",), "a part is named as it is (a file under pipelines/), not by a template")]
    try:
        return load_part(shapes.schemas_dir.parent, file, load_part_file), []
    except ConfigError as exc:
        return None, [(("file",), f"part '{file}': {exc}")]
