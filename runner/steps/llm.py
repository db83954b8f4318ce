"""`llm`: one model call with a prompt template, parsed and validated."""

from __future__ import annotations

from typing import Any

from ..engine import StepContext
from .base import Step, StepError, register
from .llm_call import build_request


@register
class LLM(Step):
    name = "llm"
    summary = "Call one model with a prompt template; parse the answer (text, or JSON against output_schema)."
    template_fields = ("prompt", "system")
    model_fields = ("model",)
    schema_fields = ("output_schema",)
    lazy_fields = ("prompt", "system")

    async def run(self, ctx: StepContext) -> Any:
        service = ctx.runtime.llm
        model = ctx.args["model"]
        if not service.enabled(model):
            raise StepError(f"model '{model}' is not enabled")
        return await service.call(build_request(ctx, model))
