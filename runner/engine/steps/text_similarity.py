"""`text_similarity`: how alike a text is to a reference, by one of the metrics of OpenAI's
text_similarity grader (runner/text/similarity.py), and whether it reaches a threshold.

`cosine` embeds both texts with the step's `model:` (an embeddings model under `models:`,
one request through the run's LLM service: cached, recorded, counted as every call is) and
compares the vectors; the other metrics need no model, and one is refused before the run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.checks.result_shapes import ShapeContext, closed
from runner.engine.context import StepContext
from runner.engine.services import CallRequest
from runner.engine.steps.base import Step, as_text, reaches, register
from runner.errors import StepError
from runner.text.similarity import EMBEDDING_METRICS, cosine, similarity
from runner.yamlpos import Path as DataPath


@dataclass(frozen=True)
class TextSimilarityArgs:
    input: Any
    reference: Any
    metric: str
    threshold: Any = None
    model: str | None = None


@register
class TextSimilarity(Step):
    name = "text_similarity"
    summary = ("How alike a text is to a reference (fuzzy_match, bleu, gleu, rouge_1..rouge_5, rouge_l: 0 to 1; "
               "cosine of the embeddings of `model:`: -1 to 1) and whether it reaches `threshold`: "
               "score, passed, metric.")
    model_fields = ("model",)
    result = closed({"score": {"type": "number"}, "passed": {"type": ["boolean", "null"]},
                     "metric": {"type": "string"}},
                    "`passed`: the score is at least `threshold` (null without one).")

    @classmethod
    def static_problems(cls, args: Mapping[str, Any], shapes: ShapeContext) -> list[tuple[DataPath, str]]:
        metric, model = args.get("metric"), args.get("model")
        if metric in EMBEDDING_METRICS and model is None:
            return [(("metric",), f"{metric} compares the texts' embeddings: add `model:` naming an embeddings "
                                  "model under models: (e.g. `embedder: {model: openai/text-embedding-3-small}`)")]
        if metric not in EMBEDDING_METRICS and model is not None:
            return [(("model",), f"{metric} needs no model (only {', '.join(EMBEDDING_METRICS)} does): "
                                 "remove `model:`")]
        return []

    async def run(self, ctx: StepContext) -> Any:
        args = ctx.arguments(TextSimilarityArgs)
        text, reference = as_text(args.input), as_text(args.reference)
        if args.metric in EMBEDDING_METRICS and args.model is not None:
            answer = await ctx.call(CallRequest(model=args.model, item=ctx.item.index, step=ctx.spec.id, embed=True,
                                                messages=[{"role": "user", "content": text},
                                                          {"role": "user", "content": reference}]))
            try:
                score = cosine(*answer["vectors"])
            except ValueError as exc:
                raise StepError(f"{ctx.where('model')}: {exc}") from None
        else:
            score = similarity(args.metric, text, reference)
        return {"score": round(score, 6), "passed": reaches(ctx, score, args.threshold), "metric": args.metric}
