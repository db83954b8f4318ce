"""`foreach`: sub-steps over a list, results in input order."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.checks.result_shapes import ShapeContext, sub_results
from runner.engine.context import NOT_GIVEN, StepContext
from runner.engine.steps.base import Step, register
from runner.errors import StepError


def elements_of(ctx: StepContext, items: Any) -> list[Any]:
    """`with.items` as the list a step goes over: a mapping's items as {key, value}, none for null."""
    if isinstance(items, dict):
        return [{"key": k, "value": v} for k, v in items.items()]
    if items is None:
        return []
    if not isinstance(items, list):
        raise StepError(f"{ctx.where('items')}: expected a list, got {type(items).__name__}")
    return items


@dataclass(frozen=True)
class ForEachArgs:
    items: Any
    as_: str
    concurrency: Any = 4
    output: Any = NOT_GIVEN            # raw: rendered per element (the sub-steps are the spec's)


@register
class ForEach(Step):
    name = "foreach"
    summary = "Run sub-steps once per element of a list (`as:` names it), in parallel up to `concurrency`."
    substeps = True
    counts_calls = True
    sub_scope = ("foreach",)
    lazy_fields = ("output",)

    @classmethod
    def result_schema(cls, args: Mapping[str, Any], shapes: ShapeContext) -> dict[str, Any]:
        return {"type": "array", "items": sub_results(args.get("steps"), shapes, args.get("output")),
                "description": "One entry per element: its `output`, or its sub-steps' results by id; the "
                               "list's `calls` and `attempts` count its sub-steps' LLM calls."}

    async def run(self, ctx: StepContext) -> Any:
        args = ctx.arguments(ForEachArgs)
        elements = elements_of(ctx, args.items)
        gate = asyncio.Semaphore(max(1, int(args.concurrency or 4)))
        name = args.as_

        async def one(index: int, element: Any) -> Any:
            async with gate:
                scope = {**ctx.scope, name: element, "foreach": {"index": index, "length": len(elements)},
                         "steps": dict(ctx.scope["steps"])}
                outcome = await ctx.run_steps(ctx.spec.substeps, scope)
                if outcome.error:
                    raise StepError(f"element {index + 1}: {outcome.error}")
                if args.output is NOT_GIVEN:
                    return {s.id: outcome.results.get(s.id) for s in ctx.spec.substeps}
                return ctx.render(args.output, "output", scope=scope)

        return list(await asyncio.gather(*(one(i, e) for i, e in enumerate(elements))))
