"""`llm`: one model call with a prompt template, parsed and validated."""

from __future__ import annotations

from typing import Any

from ..engine import StepContext
from .base import StepError, register
from .llm_call import PromptedStep, build_requests


@register
class LLM(PromptedStep):
    name = "llm"
    summary = "Call one model with a prompt template; parse the answer (text, or JSON against output_schema)."
    model_fields = ("model",)

    async def run(self, ctx: StepContext) -> Any:
        service = ctx.runtime.llm
        model = ctx.args["model"]
        if not service.enabled(model):
            raise StepError(f"model '{model}' is not enabled")
        (request,) = build_requests(ctx, [model])
        return await service.call(request)
