"""Params declared once: `params: {NAME: {default: VALUE, type: ..., minimum: ..., description: ...}}`.

A pipeline declares each param's value and its type in one place. The two-block form
(`params:` values plus a JSON Schema per param under `params_schema:`) keeps working; a file
uses one form or the other, and which one is never a guess:

- a file with `params_schema:` uses the two blocks: every value under `params:` is the
  param's value as written;
- in a file without it, a param whose value is a mapping holding `default` is a
  declaration: `default` is its value and every other key a JSON Schema keyword (`type`,
  `enum`, `minimum`, `maximum`, `minLength`, `items`, ...) or `description`; any other key
  is an error naming it. Any other value is the param's value as written. (A param whose
  value is itself a mapping with a `default` key is declared: `{default: {default: 1}}`.)

Each file is read into the two blocks as soon as it is loaded (before a variant merges into
its base and before any `--set`), so the rest of runner, run.json and `runner diff` see
plain values under `params` and their schemas under `params_schema`."""

from __future__ import annotations

from typing import Any

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


def is_declaration(value: Any) -> bool:
    return isinstance(value, dict) and "default" in value


def declared_params(located: Located) -> list[Problem]:
    """Rewrite the one-block form of `located` (one file) into `params` and `params_schema`,
    positions moved along; the problems of a declaration that is not one."""
    data = located.data
    params = data.get("params")
    if not isinstance(params, dict):
        return []
    if "params_schema" in data:
        schemas = data.get("params_schema") or {}
        return [located.problem(("params", name), "this file gives params' types under `params_schema:`, so "
                                f"this mapping would be param '{name}' itself: write its value here and its "
                                "schema under params_schema (or declare every param in one block, without "
                                "params_schema)")
                for name, value in params.items()
                if is_declaration(value) and not (isinstance(schemas, dict) and name in schemas)]
    problems: list[Problem] = []
    schemas = {}
    for name, value in params.items():
        if not is_declaration(value):
            continue
        for key in value:
            if key != "default" and key not in SCHEMA_KEYWORDS:
                hint = did_you_mean(key, SCHEMA_KEYWORDS | {"default"})
                problems.append(located.problem(("params", name, key), f"unknown key '{key}' in the declaration of "
                                                f"param '{name}'.{hint}" if hint else
                                                f"unknown key '{key}' in the declaration of param '{name}' (a "
                                                "declaration holds `default` and JSON Schema keywords such as "
                                                "type, minimum, maximum, enum, description)", key=True))
        schemas[name] = {key: value[key] for key in value if key != "default"}
        for key in schemas[name]:
            move_positions(located, ("params", name, key), ("params_schema", name, key))
        move_positions(located, ("params", name, "default"), ("params", name))
        params[name] = value["default"]
    if schemas:
        for name in schemas:
            located.value_pos.setdefault(("params_schema", name), located.where(("params", name), key=True))
            located.key_pos.setdefault(("params_schema", name), located.where(("params", name), key=True))
        located.value_pos.setdefault(("params_schema",), located.where(("params",)))
        data["params_schema"] = schemas
    return problems


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
    import json
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
