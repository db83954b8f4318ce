"""Checks of what a pipeline means, beyond its shape and its names: comparisons that can never hold
or cannot be made, a `foreach` over what is not a list, a step whose every model is disabled,
and `repeat:` samples that could only repeat one answer (N samples, with no temperature of the
step's own, from models at temperature 0: every item would look perfectly stable). Each says
what is wrong and the fix; each is built on what is known before the run
(runner/checks/static_values.py), so nothing it cannot know is refused.

(The checks a step type owns live with it: a jury's vote method against its field's type, a
decide's rules that can never apply; see `static_problems` of each step type.)

Beside them, `runner validate`'s warning about numeric votes that can be null
(`null_vote_warnings`). A `mean`, `median`, `min` or `max` jury with no number to combine (no
juror answered, or fewer than its quorum) errors the item with the jurors' own causes; under
`on_error: continue` it yields its result instead, with the vote null. An expression that then
compares that vote (`steps.jury.score >= 0.5`) raises a TypeError on exactly those items. Such a
comparison is handled when the same expression tests the vote (`is none`, `is not none`, `is
number`, `| default(...)`) or the jury's `decided`/`error`; otherwise validate warns, at the
expression."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from jinja2 import nodes

import runner.templating.sandbox as templating
from runner.checks.static_values import Known, Resolver, show
from runner.errors import did_you_mean
from runner.pipeline.model import Pipeline, StepSpec
from runner.pipeline.step_catalog import walk_steps
from runner.yamlpos import Path as DataPath

_SYMBOLS = {"lt": "<", "lteq": "<=", "gt": ">", "gteq": ">=", "eq": "==", "ne": "!=", "in": "in", "notin": "not in"}
SCALARS = {"string", "number", "boolean"}


def comparison_problems(tree: nodes.Template, resolver: Resolver, names: set[str]) -> Iterator[str]:
    """A number ordered against a string (an error at run time), and a value compared with
    one its other side can never hold (a typo'd verdict: the rule or rate silently never fires)."""
    for compare in templating.find_all(tree, nodes.Compare):
        left = compare.expr
        for operand in compare.ops:
            check = _ordering if operand.op in ("lt", "lteq", "gt", "gteq") else _equality
            problem = check(left, _SYMBOLS[operand.op], operand.expr, resolver, names)
            if problem:
                yield problem
            left = operand.expr


def _single_kind(known: Known | None) -> str | None:
    kinds = set(known.kinds) - {"null"} if known is not None else set()
    return kinds.pop() if len(kinds) == 1 else None


def _ordering(left: nodes.Expr, symbol: str, right: nodes.Expr, resolver: Resolver, names: set[str]) -> str | None:
    known = {side: resolver.of_node(side, names) for side in (left, right)}
    kinds = {side: _single_kind(k) for side, k in known.items()}
    if {kinds[left], kinds[right]} != {"number", "string"}:
        return None
    text = next(side for side in (left, right) if kinds[side] == "string")
    held_value = known[text]
    value = held_value.example if held_value is not None else None
    held = f" ({show(text)} is {value!r})" if value is not None and not isinstance(text, nodes.Const) else ""
    return (f"`{show(left)} {symbol} {show(right)}` compares a {kinds[left]} with a {kinds[right]}{held}, which "
            "fails every item at run time; make both numbers (a number is written without quotes; `| float` "
            "converts text)")


def _equality(left: nodes.Expr, symbol: str, right: nodes.Expr, resolver: Resolver, names: set[str]) -> str | None:
    """A literal compared (`==`, `!=`) or listed (`in`, `not in`) that the other side never holds:
    a typo'd verdict, said with what follows from it (never true, always true, an entry that
    never matches)."""
    if symbol in ("in", "not in"):
        if not isinstance(right, (nodes.List, nodes.Tuple)) or not right.items:
            return None
        pairs = [(left, list(right.items))]
    else:
        pairs = [(left, [right]), (right, [left])]
    for named, literals in pairs:
        if isinstance(named, nodes.Const) or not all(isinstance(literal, nodes.Const) for literal in literals):
            continue
        known = resolver.of_node(named, names)
        if known is None or known.values is None:
            continue
        wanted = [literal.value for literal in literals if isinstance(literal, nodes.Const)]
        never = [value for value in wanted if value not in known.values]
        if not never:
            continue
        values = [str(v) for v in known.values if v is not None]
        if len(never) < len(wanted):
            follows = "so that entry of the list never matches"
        else:
            follows = "so it is always true" if symbol in ("!=", "not in") else "so it can never be true"
        shown = f"[{', '.join(map(repr, wanted))}]" if symbol in ("in", "not in") else repr(wanted[0])
        return (f"`{show(named)} {symbol} {shown}`: {show(named)} is never {never[0]!r} (it is one of "
                f"{', '.join(values)}), {follows}; compare with one of them.{did_you_mean(str(never[0]), values)}")
    return None


def foreach_problem(items: Any, resolver: Resolver, names: set[str]) -> str | None:
    """A foreach whose `items` is known to be a single value (a list or a mapping is needed)."""
    known = resolver.of_template(items, names)
    kind = _single_kind(known)
    if kind not in SCALARS or known is None or "null" in known.kinds:
        return None
    value = f" ({known.example!r})" if known.example is not None else ""
    return (f"foreach runs over a list (or a mapping's entries), but items is a {kind}{value}, not a list; "
            "give a list, e.g. [a, b] or an expression that yields one")


def disabled_models_problem(named: list[str], models: Mapping[str, Any], step_uses: str) -> str | None:
    """Every model a step names is disabled in the pipeline (`enabled: false`): it can get no answer."""
    entries = [models.get(name) for name in named]
    if not named or not all(isinstance(e, dict) and e.get("enabled") is False for e in entries):
        return None
    first = named[0]
    return (f"every model this {step_uses} step names is disabled (enabled: false): {', '.join(named)}; "
            f"enable one (--set models.{first}.enabled=true) or point it at a model (--model {first}=provider/model)")


def quorum_problem(vote: Any, named: list[str]) -> str | None:
    quorum = vote.get("quorum") if isinstance(vote, dict) else None
    if not isinstance(quorum, int) or isinstance(quorum, bool) or quorum <= len(named):
        return None
    return (f"quorum {quorum} is more than the {len(named)} model(s) this jury names, so no item can reach a "
            f"verdict; lower it to {len(named)} or fewer, or name more models")


SAMPLED_STEPS = {"llm": "model", "jury": "models"}


def zero_temperature_repeats(data: Mapping[str, Any]) -> list[tuple[DataPath, str]]:
    models = data.get("models") or {}
    problems: list[tuple[DataPath, str]] = []
    for path, step in walk_steps(data.get("steps")):
        args: dict[str, Any] = step["with"] if isinstance(step.get("with"), dict) else {}
        repeat, key = args.get("repeat"), SAMPLED_STEPS.get(str(step.get("uses")))
        if key is None or not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 2 \
                or "temperature" in args:
            continue
        named = args.get(key)
        names = [str(n) for n in (named if isinstance(named, list) else [named])]
        cold = [n for n in names if isinstance(models.get(n), dict) and _zero(models[n].get("temperature"))]
        if cold:
            problems.append(((*path, "with", "repeat"),
                             f"{repeat} samples of {', '.join(cold)} at temperature 0 (models.{cold[0]}.temperature) "
                             f"are one answer drawn {repeat} times: set a temperature above 0 on the step "
                             "(e.g. temperature: 0.7)"))
    return problems


def _zero(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0


# ---- numeric votes that can be null ----------------------------------------------------

NUMERIC = ("mean", "median", "min", "max")
COMPARED = r"(?:>=|<=|==|!=|<|>|[-+*/%])"


def null_vote_warnings(pipeline: Pipeline) -> list[str]:
    """One line per expression that compares a vote that can be null without handling it."""
    warnings: list[str] = []
    nullable = [(step, step.args["vote"]["field"], step.args["vote"].get("method"))
                for step in _all_steps(pipeline.steps) if _keeps_a_null_vote(step)]
    for path, text in _expressions(pipeline):
        for step, field, method in nullable:
            vote = rf"steps\.{re.escape(step.id)}\.{re.escape(field)}\b"
            compared = re.search(rf"{vote}\s*{COMPARED}|{COMPARED}\s*{vote}", text)
            if compared and not _handled(text, step.id, vote):
                warnings.append(f"{pipeline.where(path)}: steps.{step.id}.{field} can be null (a {method} vote no "
                                f"juror answered, kept by on_error: continue) and is compared without handling "
                                f"it; test `steps.{step.id}.{field} is not none` first")
    return warnings


def _keeps_a_null_vote(step: StepSpec) -> bool:
    """A jury's `vote` (an object with a `field`) is checked by its schema before this runs."""
    return step.uses == "jury" and step.args["vote"].get("method") in NUMERIC and step.on_error == "continue"


def _handled(text: str, step_id: str, vote: str) -> bool:
    return bool(re.search(rf"{vote}\s*(?:is\s+(?:not\s+)?(?:none|number|defined)|\|\s*default)", text)
                or re.search(rf"steps\.{re.escape(step_id)}\.(?:decided|error)\b", text))


def _all_steps(steps: tuple[StepSpec, ...]) -> Iterator[StepSpec]:
    for step in steps:
        yield step
        yield from _all_steps(step.substeps)


def _expressions(pipeline: Pipeline) -> Iterator[tuple[DataPath, str]]:
    """Every string of the steps, output and summary, with its place in the file."""
    for step in _all_steps(pipeline.steps):
        yield from _strings(step.condition, (*step.path, "if"))
        yield from _strings(step.args, (*step.path, "with"))
    yield from _strings(pipeline.output, ("output",))
    yield from _strings(pipeline.located.data.get("summary"), ("summary",))


def _strings(value: Any, path: DataPath) -> Iterator[tuple[DataPath, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, inner in value.items():
            if key != "steps":                  # sub-steps are walked as steps
                yield from _strings(inner, (*path, key))
    elif isinstance(value, list):
        for number, inner in enumerate(value):
            yield from _strings(inner, (*path, number))
