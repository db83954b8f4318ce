"""`decide`: ordered rules, first match wins; a rule may stop the item."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.engine.context import StepContext
from runner.engine.steps.base import Step, register
from runner.pipeline.result_shapes import OPEN, ShapeContext, closed

RULE_KEYS = {"when", "stop"}


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
        return closed(keys, "The keys of the rule that matched (other than when and stop); null when none did.")

    async def run(self, ctx: StepContext) -> Any:
        for number, rule in enumerate(ctx.arguments(DecideArgs).rules):
            if "when" in rule and not ctx.condition(rule["when"], "rules", number, "when"):
                continue
            fields = {k: v for k, v in rule.items() if k not in RULE_KEYS}
            result = {k: ctx.render(v, "rules", number, k) for k, v in fields.items()}
            stop = rule.get("stop", False)
            if stop is True or (isinstance(stop, str) and ctx.condition(stop, "rules", number, "stop")):
                ctx.stop_requested = True
            return result
        return None
