"""What a step returns, as a JSON Schema, and the static check of `steps.X.FIELD` reads.

A result schema is *closed* (its fields are known) when it is an object schema with
`properties` and no way to hold other keys; anything else is open and never checked, so
a shape that depends on run-time values (an output schema given by an expression, a
templated `default:`) cannot produce a false error. Answer schemas written by users
(`output_schema: x.schema.json`) count as closed when they list properties and do not
allow additional ones explicitly: the schema is what the prompt asks the model for."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import nodes

import runner.templating.sandbox as templating
from runner.errors import InputError, did_you_mean
from runner.fileio import read_json
from runner.templating.sandbox import Empty, Result, ResultList, Skipped, SkippedList

OPEN: dict[str, Any] = {}
TEXT: dict[str, Any] = {"type": "string"}
# Mapping methods a template may call on any result (`steps.x.output.get('k')`).
MAPPING_METHODS = {"get", "items", "keys", "values"}
SKIPPED = "skipped"          # `steps.X.skipped`: every step's result has it
# The counters of a step that makes LLM calls (set by the engine).
COUNTS = {"calls": {"type": "integer", "description": "LLM calls made (a re-ask to repair an answer is one more)."},
          "attempts": {"type": "integer", "description": "Times they were sent: retries included, none when cached."}}
_COMBINATORS = ("anyOf", "oneOf", "allOf", "$ref", "if", "patternProperties")


def closed(properties: Mapping[str, Any], description: str = "") -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": dict(properties), "additionalProperties": False}
    if description:
        schema["description"] = description
    return schema


def open_object(properties: Mapping[str, Any], description: str) -> dict[str, Any]:
    """Known fields plus others that depend on the run (documented, never checked)."""
    return {**closed(properties, description), "additionalProperties": True}


def fields_of(schema: Any) -> dict[str, Any] | None:
    """The known fields of a closed object schema; None when the shape is open."""
    if not isinstance(schema, dict):
        return None
    if schema.get("type") == "null":
        return {}
    if schema.get("type") not in ("object", ["object", "null"], ["null", "object"]):
        return None
    properties = schema.get("properties")
    closes = isinstance(properties, dict) and schema.get("additionalProperties", False) is False
    return properties if closes and not any(k in schema for k in _COMBINATORS) else None


def union(a: Any, b: Any) -> dict[str, Any]:
    """A shape holding either: fields of both when both are closed objects, the one type when
    both have it, else open."""
    left, right = fields_of(a), fields_of(b)
    if left is None or right is None:
        same = isinstance(a, dict) and isinstance(b, dict) and a.get("type") == b.get("type") is not None
        return {"type": a["type"]} if same and a.get("type") != "object" else OPEN
    return closed({**left, **{key: union(left[key], value) if key in left else value for key, value in right.items()}})


# The JSON type of a Python value as YAML and JSON give it (bool before int: a bool is an int).
JSON_TYPES: tuple[tuple[type, str], ...] = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
                                            (list, "array"), (dict, "object"), (type(None), "null"))


def literal_shape(value: Any) -> dict[str, Any]:
    """The shape of a literal YAML value (a `default:`): mappings are closed, other values
    their JSON type, templates open."""
    if isinstance(value, dict):
        return closed({str(k): literal_shape(v) for k, v in value.items()})
    if templating.is_template(value):
        return OPEN
    return next(({"type": name} for kind, name in JSON_TYPES if isinstance(value, kind)), OPEN)


@dataclass
class ShapeContext:
    """What a step type may consult to derive its result schema from its `with:`."""

    schemas_dir: Path | None = None
    substeps: Callable[[list[Any]], dict[str, Any]] = lambda steps: {}
    _answers: dict[str, dict[str, Any] | None] = field(default_factory=dict)

    def step_result(self, step_id: str) -> dict[str, Any] | None:
        """The result shape of the pipeline's step `step_id` (anywhere in it), or None when it
        has no step of that id."""
        return self.substeps([{"id": step_id}]).get(step_id)

    def answer_schema(self, value: Any) -> dict[str, Any] | None:
        """An `output_schema:` given literally (a file in schemas/ or an inline object); None otherwise."""
        if isinstance(value, dict):
            return value
        if not isinstance(value, str) or templating.is_template(value) or self.schemas_dir is None:
            return None
        if value not in self._answers:
            try:
                loaded = read_json(self.schemas_dir / value, strict=True)
            except InputError:
                loaded = None
            self._answers[value] = loaded if isinstance(loaded, dict) else None
        return self._answers[value]


def step_shape(result_schema: Callable[[Any, ShapeContext], dict[str, Any]] | None, args: Any, on_error: Any,
               default: Any, shapes: ShapeContext) -> dict[str, Any]:
    """The JSON Schema of a step's result, as its `with:`, `on_error` and `default` shape it
    (`result_schema`: its type's; None for an unknown type)."""
    shape = result_schema(args, shapes) if result_schema is not None and isinstance(args, dict) else OPEN
    if on_error == "continue":
        shape = union(shape, closed({"error": {"type": "string"}}))
    elif on_error == "default":
        shape = union(shape, literal_shape(default))
    return shape


# ---- the values of steps that ran, and of those skipped ---------------------------------------

def empty_value(schema: Any) -> Any:
    """The empty value of a result shape, by JSON type: an object is a mapping (false in a
    condition) of its known fields' empty values, an array `[]`, a string `""`, a number 0, a
    boolean false; a type that allows null, and any shape without one type (open, an enum, a
    union), is null."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if isinstance(kind, list):
        return None if "null" in kind or len(kind) != 1 else empty_value({**schema, "type": kind[0]})
    if kind == "object":
        properties = schema.get("properties")
        return Empty({k: empty_value(v) for k, v in properties.items()} if isinstance(properties, dict) else {})
    return {"array": [], "string": "", "number": 0, "integer": 0, "boolean": False}.get(str(kind))


def skipped_value(schema: Any) -> Any:
    """A skipped step's value: the empty value of its result, `skipped` true (a list result is
    an empty list; any other result an empty mapping of its known fields)."""
    if isinstance(schema, dict) and schema.get("type") == "array":
        return SkippedList()
    empty = empty_value(schema)
    return Skipped(empty if isinstance(empty, dict) else {})


def as_result(value: Any) -> Any:
    """A step's value as later steps read it (`skipped` false); other values as they are."""
    if isinstance(value, dict) and not isinstance(value, (Result, Empty)):
        return Result(value)
    if isinstance(value, list) and not isinstance(value, ResultList):
        return ResultList(value)
    return value


def laid_over(base: Any, value: Any) -> Any:
    """`value` laid over `base`: mappings merge key by key, anything else replaces."""
    if isinstance(base, dict) and isinstance(value, dict):
        return {**base, **{key: laid_over(base.get(key), inner) for key, inner in value.items()}}
    return value


def sub_results(steps: Any, shapes: ShapeContext, output: Any) -> dict[str, Any]:
    """What one pass of a foreach/loop yields: its `output`, or its sub-steps' results."""
    if output is not None:
        return literal_shape(output)
    return closed(shapes.substeps(steps if isinstance(steps, list) else []))


def describe(schema: dict[str, Any]) -> str:
    """One line for `runner steps`: a result's fields and what shapes them."""
    note = schema.get("description", "")
    if schema.get("type") == "null":
        return "none (the step never yields a value)"
    if schema.get("type") == "array":
        return f"a list. {note}".strip()
    if schema.get("type") != "object":
        return note or "any value"
    names = ", ".join(schema.get("properties") or {})
    return f"{names}. {note}".strip() if names else note


# ---- reads of step results in templates ---------------------------------------------

def step_field_reads(tree: nodes.Template) -> Iterator[tuple[str, tuple[str, ...]]]:
    """(step id, fields read) for every `steps.X.A.B` (or `steps['X']['A']`) in a template."""
    called = {id(call.node) for call in templating.find_all(tree, nodes.Call)}
    for node in templating.find_all(tree, (nodes.Getattr, nodes.Getitem)):
        root, chain = templating.attribute_chain(node)
        if not (isinstance(root, nodes.Name) and root.name == "steps"):
            continue
        if id(node) in called:          # `steps.x.output.get(...)`: a method, not a field
            chain = chain[:-1]
        if None in chain:               # a computed key: only what comes before it is checked
            chain = chain[:chain.index(None)]
        if len(chain) >= 2 and chain[0] is not None:
            yield chain[0], tuple(str(part) for part in chain[1:])


def check_read(step_id: str, shape: Any, fields: tuple[str, ...]) -> str | None:
    """Why reading `fields` from a result of `shape` cannot work, or None."""
    for depth, name in enumerate(fields):
        known = fields_of(shape)
        if known is None:
            return None
        if name not in known:
            if (depth and name in MAPPING_METHODS) or (not depth and name == SKIPPED):
                return None
            owner = f"step '{step_id}'" if depth == 0 else f"steps.{step_id}.{'.'.join(fields[:depth])}"
            hint = did_you_mean(name, known)
            tail = f".{hint}" if hint else f" (its fields: {', '.join(sorted(known)) or 'none'})"
            return f"steps.{step_id}.{'.'.join(fields[:depth + 1])}: {owner} has no field '{name}'{tail}"
        shape = known[name]
    return None
