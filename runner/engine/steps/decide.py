"""`decide`: ordered rules, first match wins; a rule may stop the item.

A rule's `min_confidence: {STEP: LEAST}` holds only when each named step's `confidence` (an
`llm` or `jury` step with `confidence: true`) is at least LEAST. A confidence that is
absent (the server sent no token probabilities, or the step did not run) does not meet it:
the rule does not match, and the run says so once in its warnings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.engine.context import StepContext
from runner.engine.run_warnings import add_warning
from runner.engine.steps.base import Step, register
from runner.errors import StepError
from runner.pipeline.result_shapes import OPEN, ShapeContext, closed, fields_of
from runner.yamlpos import Path as DataPath

RULE_KEYS = {"when", "stop", "min_confidence"}


@dataclass(frozen=True)
class DecideArgs:
    rules: list[dict[str, Any]]         # raw: each rule's fields render only when it matches


@register
class Decide(Step):
    name = "decide"
    summary = "Pick a result by ordered rules (first `when` that holds); `stop: true` ends the item."
    lazy_fields = ("rules",)

    @classmethod
    def result_schema(cls, args: Mapping[str, Any], shapes: ShapeContext) -> dict[str, Any]:
        rules = args.get("rules")
        rules = rules if isinstance(rules, list) else []
        keys = {k: OPEN for rule in rules if isinstance(rule, dict) for k in rule if k not in RULE_KEYS}
        return closed(keys, "The keys of the rule that matched (other than when, stop and min_confidence); null "
                            "when none did.")

    @classmethod
    def static_problems(cls, args: Mapping[str, Any], shapes: ShapeContext) -> list[tuple[DataPath, str]]:
        """A min_confidence that names no step, or a step that gives no confidence."""
        problems: list[tuple[DataPath, str]] = []
        rules = args.get("rules")
        for number, rule in enumerate(rules if isinstance(rules, list) else []):
            floors = rule.get("min_confidence") if isinstance(rule, dict) else None
            for name in floors if isinstance(floors, dict) else {}:
                shape = shapes.step_result(name)
                known = fields_of(shape)
                where = ("rules", number, "min_confidence", name)
                if shape is None:
                    problems.append((where, f"no step has id '{name}'"))
                elif known is not None and "confidence" not in known:
                    problems.append((where, f"step '{name}' gives no confidence: add `confidence: true` to its "
                                            "`with:` (an llm or jury step)"))
        return problems

    async def run(self, ctx: StepContext) -> Any:
        for number, rule in enumerate(ctx.arguments(DecideArgs).rules):
            if "when" in rule and not ctx.condition(rule["when"], "rules", number, "when"):
                continue
            if "min_confidence" in rule and not _confident(ctx, rule["min_confidence"], number):
                continue
            fields = {k: v for k, v in rule.items() if k not in RULE_KEYS}
            result = {k: ctx.render(v, "rules", number, k) for k, v in fields.items()}
            stop = rule.get("stop", False)
            if stop is True or (isinstance(stop, str) and ctx.condition(stop, "rules", number, "stop")):
                ctx.stop_requested = True
            return result
        return None


def _confident(ctx: StepContext, floors: dict[str, Any], number: int) -> bool:
    """Every named step's confidence is at least its floor (an absent one never is)."""
    for name, floor in floors.items():
        least = ctx.render(floor, "rules", number, "min_confidence", name)
        if isinstance(least, bool) or not isinstance(least, (int, float)):
            raise StepError(f"{ctx.where('rules', number, 'min_confidence', name)}: {str(least)[:40]!r} is not a "
                            "number from 0 to 1")
        result = ctx.scope["steps"].get(name)
        confidence = result.get("confidence") if isinstance(result, dict) else None
        if confidence is None:
            why = "the step did not run" if result is None else "the server sent no token probabilities"
            add_warning(ctx.runtime, f"{ctx.where('rules', number, 'min_confidence')}: step '{name}' has no "
                                     f"confidence for some items ({why}): the rule did not match them")
            return False
        if confidence < least:
            return False
    return True
