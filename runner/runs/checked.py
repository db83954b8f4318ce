"""run.json and summary.json as commands read them back: every field runner reads is
type-checked against runner's schema of the file (runner/schemas/run.schema.json and
summary.schema.json), so a damaged or tampered file is a message naming the file and the
field (exit 2), never a traceback or a value read the wrong way (`"partial": "no"` is not
true)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.checks.json_schema import read_schema, validator_for
from runner.errors import InputError

RUN_SCHEMA = "run.schema.json"
SUMMARY_SCHEMA = "summary.schema.json"


def checked(path: Path, data: Any, schema: str) -> dict[str, Any]:
    """`data`, read from `path`, when it is an object whose fields have the types `schema` gives."""
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a run's {path.name} (a JSON object), but {type(data).__name__}")
    from jsonschema.exceptions import best_match
    error = best_match(validator_for(read_schema(schema)).iter_errors(data))
    if error is not None:
        field = ".".join(str(part) for part in error.absolute_path) or "the file"
        message = error.message if len(error.message) <= 200 else error.message[:197] + "..."
        raise InputError(f"{path}: {field}: {message}")
    return data
