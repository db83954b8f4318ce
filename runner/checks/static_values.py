"""What an expression is known to hold before the pipeline runs: its kinds (string, number,
boolean, array, object, null) and, where they are few and fixed, its possible values.

They come from the params' values, the JSON Schema of a step's result (an answer schema's
`type` and `enum`, a decide's literal verdicts), the output fields a summary reads as
`result.X`, literals and a few filters whose kind is plain (`| float`, `| length`, `| lower`).
Anything else is unknown (None), so a check built on what is known never fires on a guess."""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from jinja2 import nodes

import runner.templating.sandbox as templating
from runner.checks.result_shapes import JSON_TYPES

# The kind of what a filter returns, whatever it is given.
_FILTER_KINDS = {**dict.fromkeys(("int", "float", "round", "abs", "length", "count", "sum"), "number"),
                 **dict.fromkeys(("string", "lower", "upper", "trim", "title", "capitalize", "format", "join",
                                  "replace", "truncate", "tojson", "normalize", "sha256"), "string"),
                 "list": "array"}
# The kind of what an expression node makes, whatever it holds.
_NODE_KINDS = ((nodes.Compare, "boolean"), (nodes.Not, "boolean"), (nodes.Test, "boolean"), (nodes.List, "array"),
               (nodes.Tuple, "array"), (nodes.Dict, "object"), (nodes.Concat, "string"))
_JSON_KINDS = {"integer": "number", "number": "number", "string": "string", "boolean": "boolean",
               "array": "array", "object": "object", "null": "null"}


@dataclass(frozen=True)
class Known:
    kinds: frozenset[str]                       # the JSON types it may hold (integer counts as number)
    values: tuple[Any, ...] | None = None       # every value it may hold, when those are known
    example: Any = None                         # the value itself, when it is one literal value


def kind_of(value: Any) -> str:
    kind = next((name for cls, name in JSON_TYPES if isinstance(value, cls)), "object")
    return "array" if isinstance(value, tuple) else _JSON_KINDS[kind]


def of_value(value: Any) -> Known:
    return Known(frozenset({kind_of(value)}), (value,) if not isinstance(value, (dict, list)) else None, value)


def of_schema(schema: Any) -> Known | None:
    """What a value valid against `schema` may hold (an `anyOf` or `oneOf`: any of its
    branches'); None when the schema leaves it open."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return of_value(schema["const"])
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        values = tuple(schema["enum"])
        return Known(frozenset(kind_of(v) for v in values), values)
    branches = schema.get("anyOf", schema.get("oneOf"))
    if "type" not in schema and isinstance(branches, list) and branches:     # each branch's, or unknown
        return functools.reduce(union, map(of_schema, branches))
    declared = schema.get("type")
    names = [declared] if isinstance(declared, str) else declared if isinstance(declared, list) else []
    kinds = {_JSON_KINDS.get(str(name)) for name in names}
    if not kinds or None in kinds:
        return None
    return Known(frozenset(k for k in kinds if k is not None))


def union(a: Known | None, b: Known | None) -> Known | None:
    if a is None or b is None:
        return None
    values = a.values + b.values if a.values is not None and b.values is not None else None
    return Known(a.kinds | b.kinds, values)


def show(node: nodes.Node) -> str:
    """A node as the expression a user wrote (near enough for a message)."""
    if isinstance(node, nodes.Name):
        return node.name
    if isinstance(node, nodes.Getattr):
        return f"{show(node.node)}.{node.attr}"
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
        return f"{show(node.node)}[{node.arg.value!r}]"
    if isinstance(node, nodes.Const):
        return repr(node.value)
    if isinstance(node, nodes.Filter):
        return f"{show(node.node) if node.node is not None else ''} | {node.name}"
    return "(...)"


class Resolver:
    """Reads what names hold: `params` from their values, `steps.ID...` from each step's
    result schema, `result.F` from the output field F's own expression."""

    def __init__(self, params: Mapping[str, Any], result_shape: Callable[[str], dict[str, Any]],
                 output: Mapping[str, Any], step_ids: Collection[str]):
        self.params = params
        self.result_shape = result_shape
        self.output = output
        self.step_ids = step_ids
        self._outputs: dict[str, Known | None] = {}

    def of_template(self, value: Any, names: set[str]) -> Known | None:
        """A YAML value: a literal, or a string that is exactly one `{{ expression }}`."""
        if not isinstance(value, str) or not templating.is_template(value):
            return of_value(value)
        if templating.single_expression(value) is None:
            return Known(frozenset({"string"}))
        node = _expression_node(value)
        return self.of_node(node, names) if node is not None else None

    def of_node(self, node: nodes.Node, names: set[str]) -> Known | None:
        if isinstance(node, nodes.Const):
            return of_value(node.value)
        kind = next((kind for cls, kind in _NODE_KINDS if isinstance(node, cls)), None)
        if kind is not None:
            return Known(frozenset({kind}))
        if isinstance(node, nodes.CondExpr):
            other = self.of_node(node.expr2, names) if node.expr2 is not None else of_value(None)
            return union(self.of_node(node.expr1, names), other)
        if isinstance(node, nodes.Filter) and node.name in _FILTER_KINDS:
            return Known(frozenset({_FILTER_KINDS[node.name]}))
        if isinstance(node, nodes.Filter) and node.name in ("default", "d") and node.node is not None:
            fallback = self.of_node(node.args[0], names) if node.args else of_value("")
            return union(self.of_node(node.node, names), fallback)
        if isinstance(node, (nodes.Getattr, nodes.Getitem, nodes.Name)):
            return self._read(node, names)
        return None

    def _read(self, node: nodes.Node, names: set[str]) -> Known | None:
        node, read = templating.attribute_chain(node)
        chain = [part for part in read if part is not None]
        if len(chain) < len(read) or not isinstance(node, nodes.Name) or node.name not in names:
            return None
        if node.name == "params":
            value = _param(self.params, chain)
            return of_value(value) if value is not _ABSENT else None
        if node.name == "steps" and chain and chain[0] in self.step_ids:
            schema: Any = self.result_shape(chain[0])
            for part in chain[1:]:
                properties = schema.get("properties") if isinstance(schema, dict) else None
                if not isinstance(properties, dict) or part not in properties:
                    return None
                schema = properties[part]
            return of_schema(schema)
        if node.name == "result" and chain and chain[0] in self.output:
            return self._output(chain[0]) if len(chain) == 1 else None
        return None

    def _output(self, name: str) -> Known | None:
        if name not in self._outputs:
            self._outputs[name] = None                  # an output field reading itself stays unknown
            self._outputs[name] = self.of_template(self.output[name], {"steps", "params"})
        return self._outputs[name]


_ABSENT = object()


def _param(params: Mapping[str, Any], chain: list[str | None] | list[str]) -> Any:
    """The value of `params.a.b` (chain ['a', 'b']), or _ABSENT when no such param is given."""
    found: Any = params
    for part in chain:
        if not isinstance(found, Mapping) or part not in found:
            return _ABSENT
        found = found[part]
    return found


def _expression_node(value: str) -> nodes.Node | None:
    """The expression of a value that is exactly one `{{ expression }}`, parsed; None otherwise."""
    expression = templating.single_expression(value)
    tree = templating.parsed(expression, True) if expression else None
    output = tree.find(nodes.Output) if tree is not None else None
    return output.nodes[0] if output is not None and len(output.nodes) == 1 else None


def param_read(value: Any, params: Mapping[str, Any]) -> tuple[str, Any] | None:
    """(`params.a.b`, its value) when `value` is exactly `{{ params.a.b }}` and that param is given."""
    node = _expression_node(value) if isinstance(value, str) else None
    root, chain = templating.attribute_chain(node) if node is not None else (None, [])
    if not chain or None in chain or not isinstance(root, nodes.Name) or root.name != "params":
        return None
    found = _param(params, chain)
    return ("params." + ".".join(str(part) for part in chain), found) if found is not _ABSENT else None


def rendered_forms(value: Any) -> list[Any]:
    """What a step may get from a template that reads `value`: the value, its text, and the
    number that text reads as (a step converts `"3"` to 3); none for null (a placeholder)."""
    if value is None:
        return []
    forms = [value]
    if isinstance(value, (bool, int, float)):
        forms.append(str(value))
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return forms
        forms += [int(number)] if number.is_integer() else []
        forms.append(number)
    return forms


def verdicts_of(data: Mapping[str, Any], resolver: Resolver) -> list[str] | None:
    """The values the verdict field (summary.count_by, an output field) is known to take, as
    text (a result is counted by its verdict's text); None when they are open."""
    field, output = data.get("summary", {}).get("count_by"), data.get("output", {})
    if field not in output:
        return None
    known = resolver.of_template(output[field], {"steps", "params"})
    if known is None or known.values is None:
        return None
    return list(dict.fromkeys(str(value) for value in known.values if value is not None))
