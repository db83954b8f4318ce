"""`string_check`: a text against a reference, as OpenAI's string_check grader compares them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runner.checks.result_shapes import closed
from runner.engine.context import StepContext
from runner.engine.steps.base import Step, as_text, register

# OpenAI's operations: eq and ne compare the whole texts (case-sensitive); like is "the input
# contains the reference" (case-sensitive) and ilike the same in any case (no SQL wildcards).
OPERATIONS = {
    "eq": lambda text, reference: text == reference,
    "ne": lambda text, reference: text != reference,
    "like": lambda text, reference: reference in text,
    "ilike": lambda text, reference: reference.lower() in text.lower(),
}


@dataclass(frozen=True)
class StringCheckArgs:
    input: Any
    reference: Any
    operation: str


@register
class StringCheck(Step):
    name = "string_check"
    summary = ("Compare a text with a reference as OpenAI's string_check grader does: `eq`, `ne`, `like` (the "
               "text contains the reference), `ilike` (contains it, in any case): passed, and score 1 or 0.")
    result = closed({"passed": {"type": "boolean"}, "score": {"type": "number"}})

    async def run(self, ctx: StepContext) -> Any:
        args = ctx.arguments(StringCheckArgs)
        passed = bool(OPERATIONS[args.operation](as_text(args.input), as_text(args.reference)))
        return {"passed": passed, "score": 1 if passed else 0}
