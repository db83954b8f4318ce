"""What `runner align` works with: the labelled items' split into train, dev and test, the
step whose answer the labels grade, the few-shot examples made from labelled disagreements,
and instruction lines an optimizer model proposes.

The split is stratified by label, grouped (a group never straddles two splits) and seeded.
Each group (the items sharing a `--group-by` value; without one, each item alone) takes the
label most of its items have. Within each label the groups are shuffled with the seed, then
each in turn goes to the split furthest below its share of that label's items, so every
split holds each label in about the asked proportions and the same seed gives the same split.

The judge step is the `llm` or `jury` step (at the top of the pipeline) whose answer schema
has the field the labels grade: the jury's vote field, else a property named like the
results' `--predicted` field, else the one property with an `enum`. An example's answer is
the label in that field and, where the schema has a reason field, the reviewer's rationale."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Any

from runner.calibration.evaluate import value_text
from runner.errors import InputError
from runner.fileio import read_json
from runner.pipeline.model import Pipeline, StepSpec

SPLITS = ("train", "dev", "test")
REASON_FIELDS = ("reason", "rationale", "explanation", "justification")
MOST_LINES = 3


@dataclass(frozen=True)
class Labelled:
    key: str
    truth: str
    group: str
    rationale: str | None = None


@dataclass
class Split:
    train: list[Labelled] = field(default_factory=list)
    dev: list[Labelled] = field(default_factory=list)
    test: list[Labelled] = field(default_factory=list)

    def part(self, name: str) -> list[Labelled]:
        return getattr(self, name)

    def keys(self, name: str) -> set[str]:
        return {item.key for item in self.part(name)}


def parse_ratios(text: str) -> tuple[float, float, float]:
    """`60/20/20` as shares of one; train, dev and test each above 0."""
    try:
        numbers = [float(p) for p in text.split("/")]
    except ValueError:
        numbers = []
    if len(numbers) != 3 or any(n <= 0 for n in numbers):
        raise InputError(f"--split {text}: expected TRAIN/DEV/TEST, three positive numbers, e.g. --split 60/20/20")
    total = sum(numbers)
    return numbers[0] / total, numbers[1] / total, numbers[2] / total


def split_items(items: list[Labelled], ratios: tuple[float, float, float], seed: int) -> Split:
    groups: dict[str, list[Labelled]] = {}
    for item in items:
        groups.setdefault(item.group, []).append(item)
    strata: dict[str, list[str]] = {}
    for name in sorted(groups):
        label = min(Counter(i.truth for i in groups[name]).items(), key=lambda c: (-c[1], c[0]))[0]
        strata.setdefault(label, []).append(name)
    rng = random.Random(seed)
    split = Split()
    for label in sorted(strata):
        names = strata[label]
        rng.shuffle(names)
        total = sum(len(groups[n]) for n in names)
        held = [0, 0, 0]
        for name in names:
            deficits = [ratios[i] * total - held[i] for i in range(3)]
            chosen = max(range(3), key=lambda i: (deficits[i], -i))
            held[chosen] += len(groups[name])
            split.part(SPLITS[chosen]).extend(groups[name])
    for empty in (name for name in SPLITS if not split.part(name)):     # each label's share rounded it away:
        over = max((name for name in SPLITS if len({i.group for i in split.part(name)}) > 1), default=None,
                   key=lambda name: (len(split.part(name)) - ratios[SPLITS.index(name)] * len(items), name))
        given = split.part(over) if over is not None else []
        if given:           # one group (its last) from the part most over its share that has two
            moved = given[-1].group
            split.part(empty).extend(i for i in given if i.group == moved)
            given[:] = [i for i in given if i.group != moved]
    return split


@dataclass(frozen=True)
class Judge:
    step: StepSpec
    field: str
    reason: str | None
    schema: dict[str, Any]
    blocked: str | None = None          # why no example can be written in its answer schema


def _schema(pipeline: Pipeline, step: StepSpec) -> dict[str, Any] | None:
    value = step.args.get("output_schema")
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and "{{" not in value and not value.lstrip().startswith("{"):
        loaded = read_json(pipeline.schemas_dir / value, strict=True)
        return loaded if isinstance(loaded, dict) else None
    return None


def _field(step: StepSpec, schema: dict[str, Any], properties: dict[str, Any], predicted: str) -> str | None:
    vote = step.args.get("vote")
    if step.uses == "jury" and isinstance(vote, dict) and vote.get("field") in properties:
        return str(vote["field"])
    leaf = predicted.rsplit(".", 1)[-1]
    if leaf in properties:
        return leaf
    enums = [name for name, prop in properties.items() if isinstance(prop, dict) and "enum" in prop]
    if len(enums) == 1:
        return enums[0]
    required = [name for name in schema.get("required") or [] if name in properties and name not in REASON_FIELDS]
    return str(required[0]) if len(required) == 1 else None


def find_judge(pipeline: Pipeline, predicted: str) -> Judge:
    """The step the labels grade, or InputError saying why there is none to align."""
    for step in pipeline.steps:
        if step.uses not in ("llm", "jury"):
            continue
        schema = _schema(pipeline, step) or {}
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            continue
        field = _field(step, schema, properties, predicted)
        if field is None:
            continue
        reason = next((name for name in REASON_FIELDS if name in properties), None)
        others = sorted(set(schema.get("required") or []) - {field, reason})
        blocked = f"its answer schema also requires {', '.join(others)}, which a label cannot fill" if others else None
        return Judge(step, field, reason, schema, blocked)
    raise InputError(f"{pipeline.file}: align needs an llm or jury step with an answer schema (output_schema, a "
                     f"file or an object) holding the field the labels grade ('{predicted}', or the jury's vote "
                     "field, or its one property with an enum, or its one required property): found none")


def answer_value(judge: Judge, truth: str) -> tuple[Any, bool]:
    """The label as a value of the judge's answer field (an enum member, a boolean, a number
    or the text); (None, False) when the field cannot hold it."""
    prop = judge.schema["properties"][judge.field]
    prop = prop if isinstance(prop, dict) else {}
    if "enum" in prop:
        found = [v for v in prop["enum"] if value_text(v) == truth]
        return (found[0], True) if found else (None, False)
    kind = prop.get("type")
    if kind == "boolean":
        return (truth == "true", True) if truth in ("true", "false") else (None, False)
    if kind in ("integer", "number"):
        try:
            number = float(truth)
        except ValueError:
            return None, False
        return (int(number) if kind == "integer" else number), kind == "number" or number.is_integer()
    return truth, True


def make_example(judge: Judge, item: dict[str, Any], labelled: Labelled) -> dict[str, Any] | None:
    """An `examples:` entry: the item, and the answer the label says, with the rationale."""
    value, ok = answer_value(judge, labelled.truth)
    if not ok or judge.blocked:
        return None
    answer: dict[str, Any] = {judge.field: value}
    required = set(judge.schema.get("required") or [])
    if judge.reason and (labelled.rationale or judge.reason in required):
        answer[judge.reason] = labelled.rationale or f"The right answer here is {labelled.truth}."
    return {"key": labelled.key, "item": item, "answer": answer}


def choose(disagreements: list[Labelled], most: int, seed: int) -> list[Labelled]:
    """Up to `most` disagreements, balanced per label: one of each label in turn (seeded order)."""
    by_label: dict[str, list[Labelled]] = {}
    for item in sorted(disagreements, key=lambda i: i.key):
        by_label.setdefault(item.truth, []).append(item)
    rng = random.Random(seed)
    for items in by_label.values():
        rng.shuffle(items)
    rounds = zip_longest(*(reversed(by_label[label]) for label in sorted(by_label)))
    return [item for one_each in rounds for item in one_each if item is not None][:most]


def instruction_prompt(judge: Judge, disagreements: list[tuple[Labelled, str]]) -> str:
    lines = [f"- label {d.truth}, the judge said {said}" + (f"; the reviewer's reason: {d.rationale}"
                                                              if d.rationale else "")
             for d, said in disagreements[:40]]
    return ("A judge answered these items differently from its human reviewers. Propose at most "
            f"{MOST_LINES} short instruction lines to add to the judge's instructions so that it agrees with the "
            f"reviewers on items like these (its answer field is '{judge.field}'). Answer with the lines only, one "
            "a line, no numbering.\n\nDisagreements:\n" + "\n".join(lines))


def propose_lines(pipeline: Pipeline, model: str, prompt: str, cache_dir: Any) -> list[str]:
    """At most three instruction lines from the optimizer model (a name under the pipeline's
    models:), through the run's LLM service (cached like every call)."""
    from runner.engine.context import Runtime
    from runner.engine.services import CallRequest
    from runner.runs.request import RunOptions
    if model not in pipeline.models:
        raise InputError(f"--optimizer-model {model}: not a model of the pipeline (its models: "
                         f"{', '.join(sorted(pipeline.models))}); add it under models: or use --set/--model")

    async def ask() -> str:
        runtime = Runtime.create(pipeline, RunOptions(cache_dir=cache_dir))
        try:
            answer = await runtime.llm.call(CallRequest(model=model, messages=[{"role": "user", "content": prompt}],
                                                        item=0, step="align-optimizer"))
        finally:
            await runtime.aclose()
        output = answer.get("output")
        return output if isinstance(output, str) else json.dumps(output)
    text = asyncio.run(ask())
    lines = [line.strip().lstrip("-*0123456789. ").strip() for line in text.splitlines()]
    lines = [line.replace("{", "(").replace("}", ")") for line in lines]     # text, never a template
    return [line for line in lines if line][:MOST_LINES]


def system_with(judge: Judge, lines: list[str]) -> str:
    """The judge's system prompt with the instruction lines after it (a prompt file included)."""
    added = "\n".join(lines)
    system = judge.step.args.get("system")
    if not system:
        return added
    if isinstance(system, str) and system.endswith(".j2") and "\n" not in system:
        return f"{{% include {json.dumps(system)} %}}\n{added}"
    return f"{system}\n{added}"
