"""`text_similarity`: how alike a text is to a reference, by one of the metrics of OpenAI's
text_similarity grader (runner/text/similarity.py), and whether it reaches a threshold."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runner.engine.context import StepContext
from runner.engine.steps.base import Step, register
from runner.errors import StepError
from runner.pipeline.result_shapes import closed
from runner.text.similarity import similarity


@dataclass(frozen=True)
class TextSimilarityArgs:
    input: Any
    reference: Any
    metric: str
    threshold: Any = None


@register
class TextSimilarity(Step):
    name = "text_similarity"
    summary = ("How alike a text is to a reference (fuzzy_match, bleu, gleu, rouge_1..rouge_5, rouge_l; 0 to 1) "
               "and whether it reaches `threshold`: score, passed, metric.")
    result = closed({"score": {"type": "number"}, "passed": {"type": ["boolean", "null"]},
                     "metric": {"type": "string"}},
                    "`passed`: the score is at least `threshold` (null without one).")

    async def run(self, ctx: StepContext) -> Any:
        args = ctx.arguments(TextSimilarityArgs)
        text = "" if args.input is None else str(args.input)
        reference = "" if args.reference is None else str(args.reference)
        score = similarity(args.metric, text, reference)
        passed = None
        if args.threshold is not None:
            try:
                passed = score >= float(args.threshold)
            except (TypeError, ValueError):
                raise StepError(f"{ctx.where('threshold')}: {args.threshold!r} is not a number") from None
        return {"score": round(score, 6), "passed": passed, "metric": args.metric}
