"""`decide`: ordered rules, first match wins; a rule may stop the item.

A rule's `min_confidence: {STEP: LEAST}` holds only when each named step's `confidence` (an
`llm` or `jury` step with `confidence: true`) is at least LEAST. A confidence that is
absent (the server sent no token probabilities, or the step did not run) does not meet it:
the rule does not match, and the run says so once in its warnings."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.checks.result_shapes import OPEN, ShapeContext, closed, fields_of
from runner.engine.context import StepContext, add_warning
from runner.engine.steps.base import Step, register
from runner.errors import StepError
from runner.templating.sandbox import is_template
from runner.yamlpos import Path as DataPath

RULE_KEYS = {"when", "stop", "min_confidence"}
TYPO_TARGETS = ("when", "min_confidence")        # a misspelling of either changes which items the rule decides


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
        return closed(keys, "The keys of the rule that matched (other than when, stop and min_confidence); null "
                            "when none did.")

    @classmethod
    def static_problems(cls, args: Mapping[str, Any], shapes: ShapeContext) -> list[tuple[DataPath, str]]:
        """Rules no item can reach: after a rule that always applies (no `when`, or `when: true`,
        and no `min_confidence`), or with `when: false`; a min_confidence that names no step, or
        a step that gives no confidence."""
        rules: list[dict[str, Any]] = args["rules"]
        problems = _misspelt_keys(rules)
        misspelt = {where[1] for where, message in problems if "typo of 'when'" in message}    # its `when` is meant
        always: int | None = None
        why = ""
        for number, rule in enumerate(rules):
            when = str(rule.get("when", True)).strip()      # a bool or a template
            if number in misspelt:
                continue
            if always is not None:
                problems.append((("rules", number), f"this rule can never apply: rules[{always}] {why} and always "
                                                    f"applies first; move rules[{always}] last or give it a real "
                                                    "`when`"))
            elif when in ("false", "False"):
                problems.append((("rules", number), "this rule can never apply: its `when` is always false; remove "
                                                    "it or give it a real condition"))
            elif when in ("true", "True") and not rule.get("min_confidence"):
                always, why = number, "has `when: true`" if "when" in rule else "has no `when`"
        return problems + _confidence_problems(rules, shapes)

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


def _misspelt_keys(rules: list[dict[str, Any]]) -> list[tuple[DataPath, str]]:
    """A key one edit (a letter added, dropped, changed or two swapped) from `when` or
    `min_confidence`, or from a result key other rules give when no rule gives both: a typo
    that would silently be a result field (`whenn` makes a rule that always applies; `verdcit`
    leaves `verdict` null for the items its rule decides). Short keys and keys that differ in
    digits (`tier1`, `tier2`) are taken as meant; of two keys one rule each gives, the earlier
    is named, with the rule that gives the other."""
    from rapidfuzz.distance import OSA
    givers: dict[str, list[int]] = {}
    for number, rule in enumerate(rules):
        for key in rule:
            givers.setdefault(key, []).append(number)
    problems: list[tuple[DataPath, str]] = []
    for key, numbers in givers.items():
        if key in RULE_KEYS or len(key) < 4:
            continue
        for other in [*TYPO_TARGETS, *givers]:
            if other == key or OSA.distance(key, other) != 1 or re.sub(r"\d", "", key) == re.sub(r"\d", "", other):
                continue
            if other in TYPO_TARGETS:
                why = f"'{other}' is a rule's own key"
            elif set(givers[other]) & set(numbers) or (len(givers[other]), givers[other]) <= (len(numbers), numbers):
                continue        # given together, or `other` is the rarer (of as many: the earlier) of the two
            else:
                why = f"rules[{givers[other][0]}] gives '{other}'"
            problems += [(("rules", number, key), f"'{key}' looks like a typo of '{other}' ({why}); a rule's keys "
                                                  "other than when, stop and min_confidence are its result")
                         for number in numbers]
            break
    return problems


def _confidence_problems(rules: list[dict[str, Any]], shapes: ShapeContext) -> list[tuple[DataPath, str]]:
    """A min_confidence that names no step, or a step that gives no confidence."""
    problems: list[tuple[DataPath, str]] = []
    for number, rule in enumerate(rules):
        for name in rule.get("min_confidence", {}):
            shape = shapes.step_result(name)
            known = fields_of(shape)
            where = ("rules", number, "min_confidence", name)
            if shape is None:
                problems.append((where, f"no step has id '{name}'"))
            elif known is not None and "confidence" not in known:
                problems.append((where, f"step '{name}' gives no confidence: add `confidence: true` to its "
                                        "`with:` (an llm or jury step)"))
    return problems


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
