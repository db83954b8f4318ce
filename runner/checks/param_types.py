"""The declared type and range of each param (runner/pipeline/params.py), checked against the
file's values and every `--set` before anything runs."""

from __future__ import annotations

import math
from typing import Any

from runner.checks.json_schema import schema_problems
from runner.errors import Problem, unknown
from runner.yamlpos import Located


def param_problems(located: Located) -> list[Problem]:
    data = located.data
    params: dict[str, Any] = data.get("params") or {}
    problems: list[Problem] = []
    for name, schema in (data.get("params_schema") or {}).items():
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError
        if name not in params:
            problems.append(located.problem(("params_schema", name), unknown("param", name, params, "params"),
                                            key=True))
            continue
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            problems.append(located.problem(("params", name), f"its declaration is not a valid JSON Schema: "
                                                              f"{exc.message}", key=True))
            continue
        problems.extend(schema_problems(located, params[name], schema, ("params", name)))
    for name, value in params.items():
        if _holds_nan(value):     # NaN passes every minimum and maximum: never a usable tunable
            problems.append(located.problem(("params", name), "NaN is not a usable value"))
    return problems


def _holds_nan(value: Any) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, dict):
        return any(_holds_nan(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_nan(v) for v in value)
    return False
