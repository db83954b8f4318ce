"""`loop`: sub-steps repeated until a condition holds; a re-ask sees `loop.previous`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.checks.result_shapes import COUNTS, ShapeContext, closed, sub_results
from runner.engine.context import NOT_GIVEN, StepContext
from runner.engine.steps.base import Step, register
from runner.errors import StepError


@dataclass(frozen=True)
class LoopArgs:
    max: Any
    until: Any = NOT_GIVEN             # raw, like output: evaluated per iteration
    output: Any = NOT_GIVEN


@register
class Loop(Step):
    name = "loop"
    summary = "Repeat sub-steps until `until` holds or `max` is reached; templates see loop.index, loop.previous."
    substeps = True
    counts_calls = True
    sub_scope = ("loop",)
    lazy_fields = ("until", "output")

    @classmethod
    def result_schema(cls, args: Mapping[str, Any], shapes: ShapeContext) -> dict[str, Any]:
        entry = sub_results(args.get("steps"), shapes, args.get("output"))
        return closed({"iterations": {"type": "integer"}, "done": {"type": "boolean"}, "last": entry,
                       "history": {"type": "array", "items": entry}, **COUNTS},
                      "`last` and each `history` entry: the iteration's `output`, or its sub-steps' results.")

    async def run(self, ctx: StepContext) -> Any:
        args = ctx.arguments(LoopArgs)
        limit = int(args.max)
        if limit < 1:
            raise StepError(f"{ctx.where('max')}: {limit} iterations: give at least 1")
        history: list[Any] = []
        previous: dict[str, Any] | None = None
        done = False
        for index in range(1, limit + 1):
            loop = {"index": index, "previous": previous, "history": list(history), "max": limit}
            scope = {**ctx.scope, "loop": loop, "steps": dict(ctx.scope["steps"])}
            outcome = await ctx.run_steps(ctx.spec.substeps, scope)
            if outcome.error:
                raise StepError(f"iteration {index}: {outcome.error}",
                                partial={"iterations": index, "done": False, "history": history})
            previous = {s.id: outcome.results.get(s.id) for s in ctx.spec.substeps}
            entry = previous if args.output is NOT_GIVEN else ctx.render(args.output, "output", scope=scope)
            history.append(entry)
            if outcome.stopped or (args.until is not NOT_GIVEN and ctx.condition(args.until, "until", scope=scope)):
                done = True
                break
        return {"iterations": len(history), "done": done, "last": history[-1] if history else None,
                "history": history}
