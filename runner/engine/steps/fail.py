"""`fail`: end the item with an error message (input checks before any call)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runner.engine.context import StepContext
from runner.engine.steps.base import Step, register
from runner.errors import StepError


@dataclass(frozen=True)
class FailArgs:
    message: Any


@register
class Fail(Step):
    name = "fail"
    summary = "Fail the item with `message` (with `if:`, a check that runs before any LLM call)."
    result = {"type": "null"}

    async def run(self, ctx: StepContext) -> Any:
        raise StepError(str(ctx.arguments(FailArgs).message))
