"""`jury`: the `llm` call fanned out over several models, then a vote."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from runner.engine.context import Runtime, StepContext
from runner.engine.run_warnings import add_warning
from runner.engine.steps.base import register
from runner.engine.steps.llm_call import PromptedStep, build_requests
from runner.engine.voting import Agreement, Vote, majority_of, merge_answers, tally
from runner.errors import StepError, did_you_mean
from runner.pipeline.result_shapes import COUNTS, OPEN, ShapeContext, closed, fields_of, open_object
from runner.yamlpos import Path as DataPath

VERDICT_FIELDS = {"reason": {"type": "string"}, "agreement": {"type": ["number", "null"]},
                  "decided": {"type": "boolean"}, "votes": {"type": "array"},
                  "outcome": {"description": "decided, or the on_tie / on_all_failed value"},
                  "valid_votes": {"type": "integer", "description": "How many votes the verdict rests on."},
                  "seats": {"type": "integer", "description": "How many named models were enabled."}, **COUNTS}


@register
class Jury(PromptedStep):
    name = "jury"
    summary = "Ask several models the same question at once and vote on one answer field."
    model_fields = ("models",)

    @classmethod
    def result_schema(cls, args: Mapping[str, Any], shapes: ShapeContext) -> dict[str, Any]:
        vote = args.get("vote")
        field = vote.get("field") if isinstance(vote, dict) else None
        answer = fields_of(shapes.answer_schema(args.get("output_schema")))
        if not isinstance(field, str) or answer is None:
            return open_object(VERDICT_FIELDS, "Plus the vote field and the fields of the answer schema.")
        return closed({**answer, field: answer.get(field, OPEN), **VERDICT_FIELDS},
                      "The vote field, the winners' merged answer fields, and the vote's account.")

    @classmethod
    def static_problems(cls, args: Mapping[str, Any], shapes: ShapeContext) -> list[tuple[DataPath, str]]:
        vote = args.get("vote")
        field = vote.get("field") if isinstance(vote, dict) else None
        schema = args.get("output_schema")
        answer = fields_of(shapes.answer_schema(schema)) if isinstance(schema, str) else None
        if not isinstance(field, str) or not answer or field in answer:
            return []
        hint = did_you_mean(field, answer)
        tail = f".{hint}" if hint else f" (its properties: {', '.join(sorted(answer))})"
        return [(("vote", "field"), f"'{field}' is not a property of the answer schema '{schema}'{tail}")]

    async def run(self, ctx: StepContext) -> Any:
        service = ctx.runtime.llm
        vote_spec = ctx.args["vote"]
        field = vote_spec["field"]
        named = list(ctx.args["models"])
        seats = [name for name in named if service.enabled(name)]
        quorum = None if vote_spec.get("quorum") is None else int(vote_spec["quorum"])
        if len(seats) < len(named):
            _warn_short_jury(ctx.runtime, ctx.spec.id, named, seats, quorum)
        requests = build_requests(ctx, seats)
        answers = await asyncio.gather(*(ctx.call(r) for r in requests), return_exceptions=True)
        votes = [self._vote(name, answer, field) for name, answer in zip(seats, answers, strict=True)]
        outcome = tally(votes, vote_spec.get("method", "majority"), vote_spec.get("on_tie", "HUNG_JURY"),
                        vote_spec.get("on_all_failed", "LLM_ERROR"),
                        quorum,
                        vote_spec.get("reason_field", "reason"))
        _record(ctx.runtime, ctx.spec.id, {v.seat: v.value for v in votes if v.valid})
        schema = requests[0].output_schema if requests else None
        expected = list((schema or {}).get("properties", {}))
        result: dict[str, Any] = merge_answers(outcome.winners, votes, field, expected)
        result.update({
            field: outcome.value,
            "reason": outcome.reason,
            "agreement": outcome.agreement,
            "decided": outcome.decided,
            "outcome": outcome.outcome,
            "valid_votes": outcome.valid_votes,
            "seats": len(seats),
            "votes": [{"model": v.seat, "value": v.value, "answer": v.answer, "error": v.error,
                       "cached": v.cached, "latency_ms": v.latency_ms} for v in votes],
        })
        return result

    @staticmethod
    def _vote(seat: str, answer: Any, field: str) -> Vote:
        if isinstance(answer, StepError):
            partial = answer.partial or {}
            return Vote(seat, error=answer.message, cached=bool(partial.get("cached")),
                        latency_ms=int(partial.get("latency_ms") or 0))
        if isinstance(answer, BaseException):
            raise answer
        parsed = answer["output"]
        if not isinstance(parsed, dict) or field not in parsed:
            return Vote(seat, answer=parsed if isinstance(parsed, dict) else None,
                        error=f"the answer has no '{field}' field", cached=answer["cached"],
                        latency_ms=answer["latency_ms"])
        return Vote(seat, parsed[field], parsed, None, answer["cached"], answer["latency_ms"])


def _warn_short_jury(runtime: Runtime, step_id: str, named: list[str], seats: list[str], quorum: int | None) -> None:
    """Once per run and jury step (add_warning keeps one of each): the jury sits with fewer
    models than it names."""
    missing = ", ".join(name for name in named if name not in seats)
    rule = (f"its quorum is {quorum} valid vote(s)" if quorum is not None
            else f"its default quorum is a majority of the seated jurors ({majority_of(len(seats))})")
    add_warning(runtime, f"jury '{step_id}' seats {len(seats)} of the {len(named)} models it names "
                         f"({missing} not enabled); {rule}")


def _record(runtime: Runtime, step_id: str, row: dict[str, Any]) -> None:
    runtime.resource(_agreements).setdefault(step_id, Agreement()).add(row)


def _agreements(runtime: Runtime) -> dict[str, Agreement]:
    """Each jury step's agreement figures, kept as running sums over its items."""
    runtime.summary_sections["juries"] = jury_summary
    return {}


def take_agreements(runtime: Runtime) -> dict[str, Agreement]:
    """The agreement sums kept since the last take, reset (a Ray worker sends them per block)."""
    kept = runtime.resource(_agreements)
    taken = dict(kept)
    kept.clear()
    return taken


def absorb_agreements(runtime: Runtime, taken: dict[str, Agreement]) -> None:
    kept = runtime.resource(_agreements)
    for step, agreement in taken.items():
        kept.setdefault(step, Agreement()).merge(agreement)


def jury_summary(runtime: Runtime) -> dict[str, Any]:
    """Per jury step: pairwise agreement between jurors and Fleiss' kappa over the items."""
    return {step: {"items": agreement.items, "pairwise_agreement": agreement.pairwise(),
                   "fleiss_kappa": agreement.fleiss_kappa()}
            for step, agreement in runtime.resource(_agreements).items()}
