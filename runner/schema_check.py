"""JSON Schema validation with every error mapped back to its YAML line and column."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource

from .errors import Problem, did_you_mean
from .yamlpos import Located
from .yamlpos import Path as DataPath

SCHEMA_ROOT = Path(__file__).resolve().parent.parent / "schemas"
PIPELINE_SCHEMA_ID = "https://runner.dev/schemas/pipeline.schema.json"


@lru_cache(maxsize=1)
def pipeline_schema() -> dict[str, Any]:
    return json.loads((SCHEMA_ROOT / "pipeline.schema.json").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _registry() -> Registry:
    resources = [(PIPELINE_SCHEMA_ID, Resource.from_contents(pipeline_schema()))]
    for file in sorted((SCHEMA_ROOT / "steps").glob("*.schema.json")):
        contents = json.loads(file.read_text(encoding="utf-8"))
        resources.append((contents.get("$id", file.name), Resource.from_contents(contents)))
    return Registry().with_resources(resources)


@lru_cache(maxsize=64)
def _validator(schema_json: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_json), registry=_registry())


def validator_for(schema: dict[str, Any]) -> Draft202012Validator:
    return _validator(json.dumps(schema, sort_keys=True))


def schema_problems(located: Located, data: Any, schema: dict[str, Any],
                    base: DataPath = ()) -> list[Problem]:
    """Every schema error of `data` (found at `base` in the file) as located problems."""
    problems: list[Problem] = []
    for error in validator_for(schema).iter_errors(data):
        problems.extend(_explain(located, error, base))
    return problems


def _explain(located: Located, error: ValidationError, base: DataPath) -> list[Problem]:
    path = (*base, *error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = set(error.schema.get("properties", {}))
        out = []
        for key in error.instance:
            if key in known:
                continue
            hint = did_you_mean(key, known)
            message = (f"unknown key '{key}'.{hint}" if hint
                       else f"unknown key '{key}' (allowed: {', '.join(sorted(known))})")
            out.append(located.problem((*path, key), message, key=True))
        return out
    if error.validator == "required":
        return [located.problem(path, error.message.replace("is a required property", "is required"))]
    if error.validator in ("anyOf", "oneOf") and error.context:
        type_errors = [e for e in error.context if e.validator == "type"]
        chosen = type_errors[0] if type_errors else min(error.context, key=lambda e: len(e.path))
        if type_errors and not isinstance(error.instance, str):
            return [located.problem(path, _short(chosen))]
        if isinstance(error.instance, str):
            wanted = [e.validator_value for e in type_errors]
            names = ", ".join(sorted({w if isinstance(w, str) else "/".join(w) for w in wanted})) or "another type"
            return [located.problem(path, f"{error.instance!r} is not of type {names!r} "
                                          "(and is not a {{ template }})")]
        return [located.problem(path, _short(chosen))]
    if error.validator == "minItems" and error.validator_value == 1 and error.instance == []:
        return [located.problem(path, "must not be empty")]
    return [located.problem(path, _short(error))]


def _short(error: ValidationError) -> str:
    message = error.message
    return message if len(message) <= 200 else message[:197] + "..."
