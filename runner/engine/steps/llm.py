"""`llm`: one model call with a prompt template, parsed and validated; with `repeat: N`, N
samples and the value most of them give; with `confidence: true`, the probability the model
gave that value (llm_call.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.checks.result_shapes import COUNTS, ShapeContext, closed
from runner.engine.context import StepContext
from runner.engine.steps.base import register
from runner.engine.steps.llm_call import (
    CONFIDENCE_FIELD,
    STABILITY_FIELD,
    PromptArgs,
    PromptedStep,
    answer_shape,
    build_requests,
    field_problems,
    repeat_problems,
    sample,
    sampling_fields,
)
from runner.errors import StepError
from runner.yamlpos import Path as DataPath


@register
class LLM(PromptedStep):
    name = "llm"
    summary = ("Call one model with a prompt template; parse the answer (text, or JSON against output_schema). "
               "`repeat: N` votes over N samples (`stability`); `confidence: true` reads token probabilities.")
    model_fields = ("model",)

    @classmethod
    def result_schema(cls, args: Mapping[str, Any], shapes: ShapeContext) -> dict[str, Any]:
        fields = {"output": answer_shape(args, shapes), "raw": {"type": ["string", "null"]},
                  "model": {"type": "string"}, "model_id": {"type": "string"}, "usage": {"type": "object"},
                  "cost": {"type": "number"}, "cached": {"type": "boolean"},
                  "latency_ms": {"type": "integer"}, "error": {"type": ["string", "null"]}, **COUNTS}
        if "repeat" in args:
            fields.update(STABILITY_FIELD, samples={"type": "array", "description": "Each sample's value, in order."})
        if "confidence" in args:
            fields.update(CONFIDENCE_FIELD)
        return closed(fields, "`output` is the parsed answer (an object checked against output_schema, or text); "
                              "with repeat, the answer of the first sample giving the value most samples give; `calls` "
                              "the requests made (a re-ask to repair an answer is one more), `attempts` the times "
                              "they were sent (retries included, none for a cached answer).")

    @classmethod
    def static_problems(cls, args: Mapping[str, Any], shapes: ShapeContext) -> list[tuple[DataPath, str]]:
        return repeat_problems(args) + field_problems(args, shapes)

    async def run(self, ctx: StepContext) -> Any:
        args = ctx.arguments(PromptArgs)
        if not ctx.runtime.llm.enabled(args.model):
            raise StepError(f"model '{args.model}' is not enabled")
        [requests] = build_requests(ctx, [args.model])
        if "repeat" not in ctx.args and "confidence" not in ctx.args:
            return await ctx.call(requests[0])
        sampled = await sample(ctx, requests, args.field)
        if sampled.chosen is None or sampled.chosen.answer is None:
            partial = next((s.answer for s in sampled.samples if s.answer is not None), None)
            raise StepError(f"model '{args.model}': {sampled.error}", partial=partial)
        result = dict(sampled.chosen.answer)
        result.update(cached=sampled.cached, latency_ms=sampled.latency_ms,
                      **sampling_fields(ctx.args, sampled.stability, sampled.values, sampled.confidence))
        return result
