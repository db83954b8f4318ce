"""`formula`: one number from an arithmetic formula over named values (runner/pipeline/formula.py:
parsed, never eval'd), e.g. OpenAI's multi grader's `calculate_output`; with `threshold`, passed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.checks.result_shapes import ShapeContext, closed
from runner.engine.context import StepContext
from runner.engine.steps.base import Step, reaches, register
from runner.errors import StepError
from runner.pipeline.formula import FormulaError, evaluate, parse_formula
from runner.yamlpos import Path as DataPath


@dataclass(frozen=True)
class FormulaArgs:
    formula: str
    values: Mapping[str, Any]
    threshold: Any = None


@register
class Formula(Step):
    name = "formula"
    summary = ("One number from an arithmetic formula over named values (+ - * / ^, min, max, abs, floor, ceil, "
               "exp, sqrt, log; parsed, never eval'd): value, and passed against `threshold`.")
    result = closed({"value": {"type": "number"}, "passed": {"type": ["boolean", "null"]}},
                    "`passed`: the value is at least `threshold` (null without one).")

    @classmethod
    def static_problems(cls, args: Mapping[str, Any], shapes: ShapeContext) -> list[tuple[DataPath, str]]:
        try:
            parse_formula(args["formula"], args["values"])
        except FormulaError as exc:
            return [(("formula",), str(exc))]
        return []

    async def run(self, ctx: StepContext) -> Any:
        args = ctx.arguments(FormulaArgs)
        try:
            value = evaluate(args.formula, args.values)
        except FormulaError as exc:
            raise StepError(f"{ctx.where('formula')}: {exc}") from None
        return {"value": value, "passed": reaches(ctx, value, args.threshold)}
