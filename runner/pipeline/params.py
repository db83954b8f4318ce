"""Params declared once: `params: {NAME: {default: VALUE, type: ..., minimum: ..., description: ...}}`.

A param whose value is a mapping holding `default` is a declaration: `default` is its value and
every other key a JSON Schema keyword or `description` (any other key is an error naming it).
Any other value is the param's default, and declares the param's type as its default's
(`min_score: 0.6` a number, `name: x` a string; a null default declares none), so `--set`,
serve's requests and sweep grids are checked against it as against a declared one. The older
two-block form (`params_schema:`) is refused with the file's own first param as the fix.

Each file is read into plain values under `params` and their schemas under `params_schema` (what
the rest of runner sees); plain defaults are typed once a variant is merged (`typed_defaults`),
so a variant's plain value for a declared param keeps the base's declaration."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from runner.checks.result_shapes import JSON_TYPES
from runner.errors import Problem, did_you_mean
from runner.yamlpos import Located, move_positions

# Every keyword of JSON Schema draft 2020-12 a param's schema may use.
SCHEMA_KEYWORDS = frozenset({
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "format", "maxItems", "minItems", "uniqueItems", "maxContains",
    "minContains", "contains", "items", "prefixItems", "maxProperties", "minProperties", "required",
    "dependentRequired", "properties", "patternProperties", "additionalProperties", "propertyNames",
    "dependentSchemas", "unevaluatedItems", "unevaluatedProperties", "allOf", "anyOf", "oneOf", "not", "if",
    "then", "else", "title", "description", "examples", "deprecated", "readOnly", "writeOnly", "$ref", "$defs",
    "$comment", "contentEncoding", "contentMediaType", "contentSchema"})


def declared_params(located: Located) -> list[Problem]:
    """Rewrite the one-block form of `located` (one file) into `params` and `params_schema`,
    positions moved along; the problems of a declaration that is not one."""
    data = located.data
    params = data.get("params")
    if not isinstance(params, dict):
        return []
    if "params_schema" in data:
        return [located.problem(("params_schema",), _older_form(params, data.get("params_schema")), key=True)]
    problems: list[Problem] = []
    schemas = {}
    for name, value in params.items():
        if not isinstance(value, dict) or "default" not in value:     # a plain default
            continue
        for key in value:
            if key != "default" and key not in SCHEMA_KEYWORDS:
                hint = did_you_mean(key, SCHEMA_KEYWORDS | {"default"})
                tail = f".{hint}" if hint else (" (a declaration holds `default` and JSON Schema keywords such as "
                                                 "type, minimum, maximum, enum, description)")
                problems.append(located.problem(("params", name, key), f"unknown key '{key}' in the declaration of "
                                                f"param '{name}'{tail}", key=True))
        schemas[name] = {key: value[key] for key in value if key != "default"}
        for key in schemas[name]:
            move_positions(located, ("params", name, key), ("params_schema", name, key))
        move_positions(located, ("params", name, "default"), ("params", name))
        params[name] = value["default"]
    if schemas:
        _located_at_params(located, schemas)
        data["params_schema"] = schemas
    return problems


def _located_at_params(located: Located, names: Iterable[str]) -> None:
    """`params_schema` and each `params_schema.NAME` of `names` located at the param, unless written elsewhere."""
    for name in names:
        where = located.where(("params", name), key=True)
        located.value_pos.setdefault(("params_schema", name), where)
        located.key_pos.setdefault(("params_schema", name), where)
    located.value_pos.setdefault(("params_schema",), located.where(("params",)))


def _older_form(params: dict[str, Any], schemas: Any) -> str:
    """The refusal of `params_schema:`, with the file's first declared param in the one-block form."""
    example = "min_score: {default: 0.6, type: number, minimum: 0, maximum: 1}"
    for name, schema in (schemas or {}).items() if isinstance(schemas, dict) else ():
        if isinstance(schema, dict) and name in params and all(isinstance(v, (str, int, float, bool))
                                                               for v in schema.values()):
            fields = ", ".join(f"{k}: {_shown(v)}" for k, v in schema.items())
            example = f"{name}: {{default: {_shown(params[name])}{', ' if fields else ''}{fields}}}"
            break
    return ("the older form of params, no longer read: declare each param once under "
            f"`params:`, its value as `default` beside its schema, e.g. `{example}` (a plain value declares its "
            "own type), and remove params_schema")


def typed_defaults(located: Located) -> None:
    """Give each param declared by a plain default (no schema of its own, in any file of a
    variant) the type of that default, located where the default is."""
    data = located.data
    params = data.get("params")
    if not isinstance(params, dict):
        return
    schemas = data.setdefault("params_schema", {})
    typed = []
    for name, value in params.items():
        kind = next((json for cls, json in JSON_TYPES if isinstance(value, cls)), "null")
        if name not in schemas and kind != "null":
            schemas[name] = {"type": kind}
            located.value_pos.setdefault(("params_schema", name, "type"), located.where(("params", name)))
            typed.append(name)
    if schemas:
        _located_at_params(located, typed)
    else:
        del data["params_schema"]


def param_rows(params: dict[str, Any], schemas: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(name, type, default, range, description) of each param, for `runner params`."""
    rows = []
    for name, value in params.items():
        schema = schemas.get(name) or {}
        kind = schema.get("type", "-")
        rows.append((name, "|".join(kind) if isinstance(kind, list) else str(kind), _shown(value),
                     _range(schema), " ".join(str(schema.get("description", "")).split())))
    return rows


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _range(schema: dict[str, Any]) -> str:
    """`0..1`, `(0..1)` for exclusive bounds, `1..` without a maximum, `a|b` for an enum, `len 1..`."""
    if isinstance(schema.get("enum"), list):
        return "|".join(_shown(v) for v in schema["enum"])
    if "const" in schema:
        return _shown(schema["const"])
    low, high = schema.get("minimum", schema.get("exclusiveMinimum")), schema.get("maximum",
                                                                                schema.get("exclusiveMaximum"))
    if low is not None or high is not None:
        opened = "(" if "exclusiveMinimum" in schema and "minimum" not in schema else ""
        closed = ")" if "exclusiveMaximum" in schema and "maximum" not in schema else ""
        return f"{opened}{'' if low is None else low}..{'' if high is None else high}{closed}"
    short, long = schema.get("minLength", schema.get("minItems")), schema.get("maxLength", schema.get("maxItems"))
    if short is not None or long is not None:
        return f"len {'' if short is None else short}..{'' if long is None else long}"
    return ""
