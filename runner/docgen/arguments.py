"""A step type's arguments as its `with:` schema declares them, for `runner steps` and the
generated language reference: every argument and sub-field (`vote.method`, `rules[].when`),
its kind, whether it is required, its default, and each choice with what it does (an
`enum` with `enumDescriptions`, as editors show them)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml


@dataclass(frozen=True)
class Argument:
    name: str                       # `vote.method`, `rules[].when`
    kind: str                       # string, number, ..., a template, one of the choices
    required: bool = False
    description: str = ""
    default: Any = None
    choices: list[tuple[str, str]] = field(default_factory=list)     # (value, what it does)


_REFERENCED = {"template": "template", "int_or_template": "integer or template",
               "number_or_template": "number or template", "bool_or_template": "boolean or template"}


def _kind(spec: dict[str, Any]) -> str:
    """`string`, `integer or template`, `one of a, b`: what a value may be."""
    if "enum" in spec:
        return "one of " + ", ".join(str(v) for v in spec["enum"])
    declared = spec.get("type")
    if declared:
        return " or ".join(declared) if isinstance(declared, list) else str(declared)
    if isinstance(spec.get("$ref"), str):
        return _REFERENCED.get(spec["$ref"].rsplit("/", 1)[-1], "template")
    if isinstance(spec.get("anyOf"), list):
        return " or ".join(dict.fromkeys(_kind(branch) for branch in spec["anyOf"] if isinstance(branch, dict)))
    return "any"


def arguments(schema: dict[str, Any], prefix: str = "") -> Iterator[Argument]:
    """Each property of an object schema, then its own properties (and those of the objects a
    list holds), depth first, in the schema's order."""
    required = set(schema.get("required") or [])
    for name, spec in (schema.get("properties") or {}).items():
        if not isinstance(spec, dict):
            continue
        descriptions = spec.get("enumDescriptions") or []
        choices = [(str(value), str(descriptions[i]) if i < len(descriptions) else "")
                   for i, value in enumerate(spec.get("enum") or [])]
        yield Argument(f"{prefix}{name}", _kind(spec), name in required, spec.get("description", ""),
                       spec.get("default"), choices)
        if isinstance(spec.get("properties"), dict):
            yield from arguments(spec, f"{prefix}{name}.")
        items = spec.get("items")
        if isinstance(items, dict) and isinstance(items.get("properties"), dict):
            yield from arguments(items, f"{prefix}{name}[].")


def example_step(name: str, schema: dict[str, Any]) -> str:
    """The schema's first example as a step, on one line of YAML."""
    example = {"id": name, "uses": name, "with": (schema.get("examples") or [{}])[0]}
    return yaml.safe_dump(example, default_flow_style=True, width=10**6, sort_keys=False, allow_unicode=True).strip()
