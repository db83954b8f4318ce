"""`decide`: ordered rules, first match wins; a rule may stop the item."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.engine.context import StepContext
from runner.engine.steps.base import Step, register
from runner.pipeline.result_shapes import OPEN, ShapeContext, closed
from runner.pipeline.templating import is_template
from runner.yamlpos import Path as DataPath

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
        """Each key the rules give; where every rule gives it a literal, those are its values."""
        rules = args.get("rules")
        rules = [rule for rule in rules if isinstance(rule, dict)] if isinstance(rules, list) else []
        keys: dict[str, Any] = {}
        for key in dict.fromkeys(k for rule in rules for k in rule if k not in RULE_KEYS):
            given = [rule[key] for rule in rules if key in rule]
            literal = all(isinstance(v, (str, int, float, bool)) and not is_template(v) for v in given)
            keys[key] = {"enum": list(dict.fromkeys(given))} if literal else OPEN
        return closed(keys, "The keys of the rule that matched (other than when and stop); null when none did.")

    @classmethod
    def static_problems(cls, args: Mapping[str, Any], shapes: ShapeContext) -> list[tuple[DataPath, str]]:
        """Rules no item can reach: after a rule that always applies, or with `when: false`."""
        given = args.get("rules")
        rules: list[Any] = given if isinstance(given, list) else []
        problems: list[tuple[DataPath, str]] = []
        always: int | None = None
        why = ""
        for number, rule in enumerate(rules):
            when = rule.get("when", True) if isinstance(rule, dict) else True
            if always is not None:
                problems.append((("rules", number), f"this rule can never apply: rules[{always}] {why} and always "
                                                    f"applies first; move rules[{always}] last or give it a real "
                                                    "`when`"))
            elif when is False or (isinstance(when, str) and when.strip() in ("false", "False")):
                problems.append((("rules", number), "this rule can never apply: its `when` is always false; remove "
                                                    "it or give it a real condition"))
            elif when is True or (isinstance(when, str) and when.strip() in ("true", "True")):
                always, why = number, "has no `when`" if isinstance(rule, dict) and "when" not in rule \
                    else "has `when: true`"
        return problems

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
