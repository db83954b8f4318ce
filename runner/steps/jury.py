"""`jury`: the `llm` call fanned out over several models, then a vote."""

from __future__ import annotations

import asyncio
from typing import Any

from ..engine import Runtime, StepContext
from ..run_warnings import add_warning
from ..voting import Vote, fleiss_kappa, majority_of, merge_answers, pairwise_agreement, tally
from .base import StepError, register
from .llm_call import PromptedStep, build_requests


@register
class Jury(PromptedStep):
    name = "jury"
    summary = "Ask several models the same question at once and vote on one answer field."
    model_fields = ("models",)

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
        answers = await asyncio.gather(*(service.call(r) for r in requests), return_exceptions=True)
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
    """Once per run and jury step: the jury sits with fewer models than it names."""
    warned = runtime.shared.setdefault("jury.short_warned", set())
    if step_id in warned:
        return
    warned.add(step_id)
    missing = ", ".join(name for name in named if name not in seats)
    rule = (f"its quorum is {quorum} valid vote(s)" if quorum is not None
            else f"its default quorum is a majority of the seated jurors ({majority_of(len(seats))})")
    add_warning(runtime, f"jury '{step_id}' seats {len(seats)} of the {len(named)} models it names "
                         f"({missing} not enabled); {rule}")


def _record(runtime: Runtime, step_id: str, row: dict[str, Any]) -> None:
    rows = runtime.shared.setdefault("jury.rows", {}).setdefault(step_id, [])
    rows.append(row)
    runtime.shared.setdefault("summary.sections", {})["juries"] = jury_summary


def jury_summary(runtime: Runtime) -> dict[str, Any]:
    """Per jury step: pairwise agreement between jurors and Fleiss' kappa over the items."""
    return {step: {"items": len(rows), "pairwise_agreement": pairwise_agreement(rows),
                   "fleiss_kappa": fleiss_kappa(rows)}
            for step, rows in runtime.shared.get("jury.rows", {}).items()}
