"""`llm`: one model call with a prompt template, parsed and validated."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.engine.context import StepContext
from runner.engine.steps.base import register
from runner.engine.steps.llm_call import PromptedStep, answer_shape, build_requests
from runner.errors import StepError
from runner.pipeline.result_shapes import COUNTS, ShapeContext, closed


@dataclass(frozen=True)
class LLMArgs:
    model: str            # the prompt, schema and sampling arguments: see llm_call.build_requests


@register
class LLM(PromptedStep):
    name = "llm"
    summary = "Call one model with a prompt template; parse the answer (text, or JSON against output_schema)."
    model_fields = ("model",)

    @classmethod
    def result_schema(cls, args: Mapping[str, Any], shapes: ShapeContext) -> dict[str, Any]:
        return closed({"output": answer_shape(args, shapes), "raw": {"type": ["string", "null"]},
                       "model": {"type": "string"}, "model_id": {"type": "string"}, "usage": {"type": "object"},
                       "cost": {"type": "number"}, "cached": {"type": "boolean"},
                       "latency_ms": {"type": "integer"}, "error": {"type": ["string", "null"]}, **COUNTS},
                      "`output` is the parsed answer (an object checked against output_schema, or text); `calls` "
                      "the requests made (a re-ask to repair an answer is one more), `attempts` the times they "
                      "were sent (retries included, none for a cached answer).")

    async def run(self, ctx: StepContext) -> Any:
        service = ctx.runtime.llm
        model = ctx.arguments(LLMArgs).model
        if not service.enabled(model):
            raise StepError(f"model '{model}' is not enabled")
        (request,) = build_requests(ctx, [model])
        return await ctx.call(request)
