"""`jury`: the `llm` call fanned out over several models, then a vote."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from runner.checks.result_shapes import COUNTS, OPEN, ShapeContext, closed, fields_of, open_object
from runner.checks.static_values import of_schema
from runner.engine.context import Runtime, StepContext, add_warning
from runner.engine.steps.base import register
from runner.engine.steps.llm_call import (
    CONFIDENCE_FIELD,
    STABILITY_FIELD,
    PromptedStep,
    Sampled,
    build_requests,
    not_a_property,
    repeat_problems,
    sample,
    sampling_fields,
)
from runner.engine.voting import (
    CATEGORICAL,
    NUMERIC,
    Outcome,
    Vote,
    VoteError,
    majority_of,
    merge_answers,
    tally,
    usable_votes,
    vote_rule,
)
from runner.errors import StepError, did_you_mean
from runner.stores.kept import note_votes
from runner.templating.sandbox import is_template
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
        account = {**VERDICT_FIELDS, **(STABILITY_FIELD if "repeat" in args else {}),
                   **(CONFIDENCE_FIELD if "confidence" in args else {})}
        if not isinstance(field, str) or answer is None:
            return open_object(account, "Plus the vote field and the fields of the answer schema.")
        return closed({**answer, field: _verdicts(answer.get(field, OPEN), vote), **account},
                      "The vote field, the winners' merged answer fields, and the vote's account.")

    @classmethod
    def static_problems(cls, args: Mapping[str, Any], shapes: ShapeContext) -> list[tuple[DataPath, str]]:
        return [*_vote_problems(args, shapes), *repeat_problems(args)]

    async def run(self, ctx: StepContext) -> Any:
        vote_spec = vote_rule(ctx.args["vote"])
        field = vote_spec["field"]
        named = list(ctx.args["models"])
        seats = [name for name in named if ctx.runtime.llm.enabled(name)]
        quorum = None if vote_spec.get("quorum") is None else int(vote_spec["quorum"])
        if len(seats) < len(named):
            _warn_short_jury(ctx.runtime, ctx.spec.id, named, seats, quorum)
        requests = build_requests(ctx, seats)
        sampled = await asyncio.gather(*(sample(ctx, per_seat, field) for per_seat in requests))
        answered = [self._vote(name, seat) for name, seat in zip(seats, sampled, strict=True)]
        method = vote_spec["method"]
        try:
            votes = usable_votes(answered, method, field)
        except VoteError as exc:        # the jurors answered: the vote is what cannot be taken
            raise StepError(f"{ctx.where('vote', 'method')}: {exc}",
                            partial={"votes": _shown(answered, ctx.args)}) from None
        outcome = tally(votes, method, vote_spec["on_tie"], vote_spec["on_all_failed"], quorum,
                        vote_spec["reason_field"])
        note_votes(ctx.spec.id, method in NUMERIC, {v.seat: v.value for v in votes if v.valid})
        if outcome.short and any(v.error for v in votes):       # a quorum lost to failed calls: as if none answered
            ctx.runtime.llm.no_verdict(ctx.item.index, f"step '{ctx.spec.id}': {no_verdict(outcome, votes)}")
        schema = requests[0][0].output_schema if requests else None
        expected = list((schema or {}).get("properties", {}))
        result: dict[str, Any] = merge_answers(outcome.winners, votes, field, expected)
        result.update({field: outcome.value, "reason": outcome.reason, "agreement": outcome.agreement,
                       "decided": outcome.decided, "outcome": outcome.outcome, "valid_votes": outcome.valid_votes,
                       "seats": len(seats), "votes": _shown(votes, ctx.args)})
        if "repeat" in ctx.args:
            result["stability"] = pooled_stability(sampled)
        if "confidence" in ctx.args:
            result["confidence"] = mean_confidence(outcome.winners)
        if method in NUMERIC and outcome.value is None:
            raise StepError(no_number(outcome.reason, method, votes), partial=result)
        return result

    @staticmethod
    def _vote(seat: str, sampled: Sampled) -> Vote:
        first = sampled.chosen or (sampled.samples[0] if len(sampled.samples) == 1 else None)
        output = (first.answer or {}).get("output") if first is not None else None
        return Vote(seat, sampled.value, output if isinstance(output, dict) else None, sampled.error,
                    sampled.cached, sampled.latency_ms, sampled.stability, sampled.confidence, sampled.values)


def no_verdict(outcome: Outcome, votes: list[Vote]) -> str:
    """Why a jury that lost jurors to failed calls gave no verdict: each cause once, in seat order
    (the same text whichever call failed last, so items failing alike are one error group)."""
    causes = "; ".join(dict.fromkeys(v.error for v in votes if v.error))
    head = "no juror answered" if not outcome.valid_votes else outcome.reason.split(";")[0].replace("Quorum", "quorum")
    return f"{head}: {causes}"


def no_number(reason: str, method: str, votes: list[Vote]) -> str:
    """A numeric vote with no number is the item's error, with the jurors' own causes (each
    cause once, so that items failing the same way are one error group): `on_error: continue`
    keeps the null vote and its outcome for a pipeline that handles it."""
    causes = list(dict.fromkeys(v.error for v in votes if v.error))
    head = "no juror answered" if not any(v.valid for v in votes) else reason.split(";")[0]
    return f"{head}, so the {method} vote is null: {'; '.join(causes) or reason}"


def pooled_stability(seats: list[Sampled]) -> float | None:
    """The share of all the seats' answered samples that give their own seat's leading value
    (1.0 when every seat's samples agree; a seat whose samples tie counts its leaders)."""
    answered = sum(seat.answered for seat in seats)
    return round(sum(seat.agreeing for seat in seats) / answered, 4) if answered else None


def mean_confidence(winners: list[Vote]) -> float | None:
    """The mean confidence of the votes the verdict rests on, over those that carry one."""
    sure = [v.confidence for v in winners if v.confidence is not None]
    return round(sum(sure) / len(sure), 4) if sure else None


def method_problem(method: str, field: str, schema: Any, named: str) -> str | None:
    """A vote method the voted field's type cannot serve: numbers for mean, median, min and
    max; a string, enum, boolean or integer for the others (a float never ties exactly)."""
    known = of_schema(schema)
    if known is None:
        return None
    kinds = set(known.kinds) - {"null"}
    declared = schema.get("type")
    integers = set([declared] if isinstance(declared, str) else declared or []) - {"null"} == {"integer"}
    where = f"'{field}' is {' or '.join(sorted(kinds))} in the answer schema {named}"
    if method in NUMERIC and "number" not in kinds:      # other kinds beside a number are abstentions
        return (f"vote method '{method}' needs numbers; {where}; use method: majority (or unanimous, plurality) "
                f"for a {' or '.join(sorted(kinds))}, or make '{field}' a number")
    if method in CATEGORICAL and ("object" in kinds or "array" in kinds
                                 or (kinds == {"number"} and known.values is None and not integers)):
        return (f"vote method '{method}' needs a string, enum, boolean or integer; {where}; use method: mean "
                f"(or median, min, max) for a number, or vote on a field that holds a category")
    return None


def _verdicts(schema: Any, vote: Any) -> Any:
    """The vote field's values after the vote: the answers' enum plus on_tie and on_all_failed."""
    if not isinstance(schema, dict) or not isinstance(schema.get("enum"), list) or not isinstance(vote, dict):
        return schema
    rule = vote_rule(vote)
    extra = [rule["on_tie"], rule["on_all_failed"]]
    if rule["method"] in NUMERIC or any(is_template(value) for value in extra):
        return OPEN
    values = list(schema["enum"])
    for value in extra:                    # compared, not hashed: an enum may hold lists and objects
        if value not in values:
            values.append(value)
    return {**schema, "enum": values}


def _shown(votes: list[Vote], args: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"model": v.seat, "value": v.value, "answer": v.answer, "error": v.error, "cached": v.cached,
             "latency_ms": v.latency_ms, **sampling_fields(args, v.stability, v.samples, v.confidence)} for v in votes]


def _warn_short_jury(runtime: Runtime, step_id: str, named: list[str], seats: list[str], quorum: int | None) -> None:
    """Once per run and jury step (add_warning keeps one of each): the jury sits with fewer
    models than it names."""
    missing = ", ".join(name for name in named if name not in seats)
    rule = (f"its quorum is {quorum} valid vote(s)" if quorum is not None
            else f"its default quorum is a majority of the seated jurors ({majority_of(len(seats))})")
    add_warning(runtime, f"jury '{step_id}' seats {len(seats)} of the {len(named)} models it names "
                         f"({missing} not enabled); {rule}")


def _vote_problems(args: Mapping[str, Any], shapes: ShapeContext) -> list[tuple[DataPath, str]]:
    """What is wrong with `vote:` against the answer schema (its field, method and reason field)."""
    vote, schema = args["vote"], args.get("output_schema")
    field, reason = vote["field"], vote.get("reason_field")
    given = shapes.answer_schema(schema)
    answer = fields_of(given)          # closed: a field it does not list is an error
    listed = given.get("properties") if isinstance(given, dict) else None
    named = f"'{schema}'" if isinstance(schema, str) else "given inline"
    if answer and field not in answer:
        return [(("vote", "field"), not_a_property(field, answer, f" {named}"))]
    problems: list[tuple[DataPath, str]] = []
    if isinstance(listed, dict) and field in listed:
        problem = method_problem(vote_rule(vote)["method"], field, listed[field], named)
        if problem:
            problems.append((("vote", "method") if "method" in vote else ("vote", "field"), problem))
    if answer and reason is not None and reason not in answer:
        hint = did_you_mean(reason, answer)
        problems.append((("vote", "reason_field"), f"'{reason}' is not a property of the answer schema {named}, "
                         "so no reason would be quoted; name one of its fields"
                         + (f".{hint}" if hint else f" ({', '.join(sorted(answer))})")))
    return problems

