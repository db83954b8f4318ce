"""`excerpts`: verbatim evidence, checked and re-asked. For each element of a list (an attribute
to fill, a claim to support), a model's candidate excerpts are checked by the quote matcher
against the text they must be copied from; while any fails and re-asks remain, the sub-steps
run (a re-ask, which sees `excerpts.rejected`: what failed and why) and give the next
candidates. What would otherwise be a foreach around a loop around a foreach."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.checks.result_shapes import ShapeContext
from runner.engine.context import StepContext
from runner.engine.steps.base import Step, register
from runner.engine.steps.foreach import elements_of
from runner.errors import StepError
from runner.text.quotes import Source, match_quote

EXCERPT = {"type": "object", "properties": {"text": {"type": "string"}, "confidence": {},
                                            "similarity_score": {"type": "number"}}}
REJECTED = {"type": "object", "properties": {"text": {"type": "string"}, "reason": {"type": "string"},
                                             "similarity_score": {"type": "number"}}}
ABSTAINED = "none"          # a candidate whose confidence is "none": the model says the text shows nothing


@dataclass(frozen=True)
class ExcerptsArgs:
    items: Any
    as_: str
    key: Any                       # lazy: the element's name in the result
    found: Any                     # lazy: the first try's candidates for the element
    reasked: Any                   # lazy: the candidates a re-ask's answer gives (reads the sub-steps)
    text: Any
    threshold: Any = 0.8
    max: Any = 3
    reasks: Any = 2
    concurrency: Any = 4


@register
class Excerpts(Step):
    name = "excerpts"
    summary = ("Check candidate excerpts of each element against a text (quote match); re-ask with the failures "
               "(`excerpts.rejected`) until they all pass or `reasks` ran out.")
    substeps = True
    counts_calls = True
    sub_scope = ("excerpts",)
    lazy_fields = ("key", "found", "reasked")

    @classmethod
    def result_schema(cls, args: Mapping[str, Any], shapes: ShapeContext) -> dict[str, Any]:
        entry = {"type": "object", "additionalProperties": False, "properties": {
            "key": {}, "retries": {"type": "integer"},
            "excerpts": {"type": "array", "items": EXCERPT,
                         "description": "The candidates found, first `max` of those that passed, unique by text."},
            "rejected": {"type": "array", "items": REJECTED, "description": "Those that failed, every try's."}}}
        return {"type": "array", "items": entry,
                "description": "One entry per element, in order; the list's `calls` and `attempts` count the "
                               "re-asks' LLM calls."}

    async def run(self, ctx: StepContext) -> Any:
        args = ctx.arguments(ExcerptsArgs)
        elements = elements_of(ctx, args.items)
        gate = asyncio.Semaphore(max(1, int(args.concurrency)))
        source, threshold, most = Source([(str(args.text or ""), 1)]), float(args.threshold), max(1, int(args.max))

        def candidates(value: Any, field: str) -> list[Mapping[str, Any]]:
            if value is None:
                return []
            if not isinstance(value, list):
                raise StepError(f"{ctx.where(field)}: expected a list of excerpts, got {type(value).__name__}")
            kept = [c for c in value if isinstance(c, Mapping) and c.get("confidence") != ABSTAINED]
            return kept[:most]

        async def one(element: Any) -> dict[str, Any]:
            async with gate:
                scope = {**ctx.scope, args.as_: element, "steps": dict(ctx.scope["steps"])}
                key = ctx.render(args.key, "key", scope=scope)
                trying = candidates(ctx.render(args.found, "found", scope=scope), "found")
                passed: list[dict[str, Any]] = []
                rejected: list[dict[str, Any]] = []
                retries = 0
                while True:
                    failed = []
                    for candidate in trying:
                        said = str(candidate.get("text", ""))
                        match = match_quote(said, source, threshold)
                        if match.passed:
                            passed.append({"text": said, "confidence": candidate.get("confidence"),
                                           "similarity_score": match.score})
                        else:
                            failed.append({"text": said, "reason": match.reason, "similarity_score": match.score})
                    rejected.extend(failed)
                    if not failed or retries >= int(args.reasks):
                        break
                    retries += 1
                    scope["excerpts"] = {"attempt": retries + 1, "rejected": failed}
                    outcome = await ctx.run_steps(ctx.spec.substeps, scope)
                    if outcome.error:
                        raise StepError(f"{key}: re-ask {retries}: {outcome.error}")
                    trying = candidates(ctx.render(args.reasked, "reasked", scope=scope), "reasked")
                unique: dict[str, dict[str, Any]] = {}
                for excerpt in passed:
                    unique.setdefault(excerpt["text"], excerpt)
                return {"key": key, "retries": retries, "excerpts": list(unique.values())[:most],
                        "rejected": rejected}

        return list(await asyncio.gather(*(one(e) for e in elements)))
