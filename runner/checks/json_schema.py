"""JSON Schema validation with every error mapped back to its YAML line and column, and the
declared type and range of each param (runner/pipeline/params.py) checked against the file's
values and every `--set` before anything runs (`param_problems`)."""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.errors import Problem, unknown
from runner.yamlpos import Located
from runner.yamlpos import Path as DataPath

if TYPE_CHECKING:       # jsonschema is imported when something is checked: a known-valid run never is
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError
    from referencing import Registry

# runner's own schemas, package data beside this package (a pipeline's answer schemas live in its
# project's schemas/ folder); read as files, with no importlib.resources at every start.
SCHEMA_ROOT = Path(__file__).resolve().parent.parent / "schemas"
PIPELINE_SCHEMA_ID = "https://runner.dev/schemas/pipeline.schema.json"


def read_schema(*parts: str) -> dict[str, Any]:
    """A schema shipped with runner, e.g. read_schema("steps", "jury.schema.json")."""
    return json.loads(SCHEMA_ROOT.joinpath(*parts).read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def pipeline_schema() -> dict[str, Any]:
    return read_schema("pipeline.schema.json")


def step_schema_names() -> list[str]:
    """The step types that ship a `with:` schema."""
    return sorted(entry.name.removesuffix(".schema.json") for entry in (SCHEMA_ROOT / "steps").iterdir()
                  if entry.name.endswith(".schema.json"))


@lru_cache(maxsize=1)
def _registry() -> Registry:
    from referencing import Registry, Resource
    resources = [(PIPELINE_SCHEMA_ID, Resource.from_contents(pipeline_schema()))]
    for name in step_schema_names():
        contents = read_schema("steps", f"{name}.schema.json")
        resources.append((contents.get("$id", name), Resource.from_contents(contents)))
    return Registry().with_resources(resources)


TEMPLATE_PATTERN = "\\{[{%]"     # $defs.template: a value that is a {{ template }}


@lru_cache(maxsize=64)
def _validator(schema_json: str) -> Draft202012Validator:
    from jsonschema import Draft202012Validator
    return Draft202012Validator(json.loads(schema_json), registry=_registry())


def validator_for(schema: dict[str, Any]) -> Draft202012Validator:
    return _validator(json.dumps(schema, sort_keys=True))


@lru_cache(maxsize=256)
def _not_a_schema(schema_json: str) -> str | None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError
    try:
        Draft202012Validator.check_schema(json.loads(schema_json))
    except SchemaError as exc:
        return exc.message
    return None


def not_a_schema(schema: Any) -> str | None:
    """Why `schema` is not a valid JSON Schema (None when it is). Checked once per schema text
    in a process: a sweep, probe or server loads one pipeline's answer schemas many times. A
    schema written in YAML may hold what JSON has no type for (an unquoted date is a YAML date)."""
    try:
        text = json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        bad: Any = next((leaf for leaf in leaves(schema) if not _is_json(leaf)), None)
        if hasattr(bad, "isoformat"):
            return f"it holds {bad.isoformat()}, a date or time, which is not a JSON value (in YAML: quote it)"
        return f"it holds {bad!r}, which is not a JSON value"
    return _not_a_schema(text)


def leaves(value: Any) -> Iterator[Any]:
    """Every value inside mappings and lists, however deep, that is neither."""
    if isinstance(value, (dict, list)):
        for inner in value.values() if isinstance(value, dict) else value:
            yield from leaves(inner)
    else:
        yield value


def _is_json(value: Any) -> bool:
    return value is None or isinstance(value, (str, bool, int)) or (isinstance(value, float) and math.isfinite(value))


def schema_problems(located: Located, data: Any, schema: dict[str, Any],
                    base: DataPath = ()) -> list[Problem]:
    """Every schema error of `data` (found at `base` in the file) as located problems."""
    problems = []
    for error in validator_for(schema).iter_errors(data):
        path = (*base, *error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            known = set(error.schema.get("properties", {})) if isinstance(error.schema, dict) else set()
            problems += [located.problem((*path, key), unknown("key", key, known, "allowed"), key=True)
                         for key in error.instance if key not in known]
        elif "propertyNames" in error.schema_path and isinstance(error.instance, str):     # at the name itself
            problems.append(located.problem((*path, error.instance), _message(error), key=True))
        else:
            problems.append(located.problem(path, _message(error)))
    return problems


def first_error(schema: dict[str, Any], value: Any) -> ValidationError | None:
    """jsonschema's best match among the errors of `value` against `schema` (None: it is valid)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match
    return best_match(Draft202012Validator(schema).iter_errors(value))


TEMPLATE_TOO = " (and is not a {{ template }})"


def _message(error: ValidationError) -> str:
    if error.validator == "required":
        return schema_message(error).replace("is a required property", "is required")
    if error.validator in ("anyOf", "oneOf") and error.context:
        # A value of the right type that breaks a bound or a form (retries: -1, a bad URL).
        bounds = [e for e in error.context if e.validator != "type"
                  and not (e.validator == "pattern" and e.validator_value == TEMPLATE_PATTERN)]
        if bounds and bounds[0].validator == "pattern":
            about = error.schema.get("description") if isinstance(error.schema, dict) else None
            return f"{error.instance!r} is not valid here" + (f": {about}" if about else "")
        if bounds:
            return _short(bounds[0])
        type_errors = [e for e in error.context if e.validator == "type"]
        if isinstance(error.instance, str):
            wanted: list[Any] = [e.validator_value for e in type_errors]
            names = ", ".join(sorted({w if isinstance(w, str) else "/".join(w) for w in wanted})) or "another type"
            return f"{error.instance!r} is not of type {names!r}{TEMPLATE_TOO}"
        return _short(type_errors[0] if type_errors else min(error.context, key=lambda e: len(e.path)))
    if error.validator == "not" and isinstance(error.validator_value, dict) and "description" in error.validator_value:
        return str(error.validator_value["description"])
    if error.validator == "minItems" and error.validator_value == 1 and error.instance == []:
        return "must not be empty"
    return _short(error)


def _short(error: ValidationError) -> str:
    message = schema_message(error)
    return message if len(message) <= 200 else message[:197] + "..."


def schema_message(error: ValidationError) -> str:
    """jsonschema's message with each YAML date or time in the value shown in ISO form
    (2024-01-01), not as Python's repr (datetime.date(2024, 1, 1)): every schema message is made here."""
    message = error.message
    if "datetime." in message:
        stack = [error.instance]
        while stack:
            value = stack.pop()
            if isinstance(value, dict):
                stack.extend([*value, *value.values()])
            elif isinstance(value, list):
                stack.extend(value)
            elif isinstance(value, datetime.date):      # a datetime is one too
                message = message.replace(repr(value), str(value))
    return message


def param_problems(located: Located) -> list[Problem]:
    data = located.data
    params: dict[str, Any] = data.get("params") or {}
    problems: list[Problem] = []
    for name, schema in (data.get("params_schema") or {}).items():
        if name not in params:
            problems.append(located.problem(("params_schema", name), unknown("param", name, params, "params"),
                                            key=True))
            continue
        refused = not_a_schema(schema)
        if refused:
            problems.append(located.problem(("params", name), f"its declaration is not a valid JSON Schema: "
                                                              f"{refused}", key=True))
            continue
        problems.extend(schema_problems(located, params[name], schema, ("params", name)))
    for name, value in params.items():
        if any(isinstance(leaf, float) and math.isnan(leaf) for leaf in leaves(value)):
            problems.append(located.problem(("params", name), "NaN is not a usable value"))   # passes every bound
    return problems
