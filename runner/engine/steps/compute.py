"""`compute`: named values from expressions, in order (later ones see `values`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.checks.result_shapes import OPEN, ShapeContext, closed
from runner.engine.context import StepContext
from runner.engine.steps.base import Step, register


@register
class Compute(Step):
    name = "compute"
    summary = "Named values from expressions, e.g. `adjusted: \"{{ x * q if q > 0.5 else x }}\"`."
    own_scope = ("values",)
    render_args = False

    @classmethod
    def result_schema(cls, args: Mapping[str, Any], shapes: ShapeContext) -> dict[str, Any]:
        return closed(dict.fromkeys(args, OPEN), "One field per name under `with:`.")

    async def run(self, ctx: StepContext) -> Any:
        values: dict[str, Any] = {}
        scope = {**ctx.scope, "values": values}
        for name, expression in ctx.spec.args.items():
            values[name] = ctx.render(expression, name, scope=scope)
        return values
