"""`repeat:` samples that could only repeat one answer: a step that draws N samples with no
temperature of its own, from models whose temperature is 0 (the shipped judges' is). Each
sample would be the answer drawn again, and every item would look perfectly stable."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.pipeline.step_catalog import walk_steps
from runner.yamlpos import Path as DataPath

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

