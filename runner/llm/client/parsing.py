"""Answer parsing: the JSON ladder, then the output schema."""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

FENCED_JSON = re.compile(r"```json\s*\n?(.*?)```", re.DOTALL | re.IGNORECASE)
FENCED_ANY = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
# A reasoning model's thoughts are not its answer (an unclosed block runs to the end).
THINKING = re.compile(r"<(think|thinking|reasoning)>.*?(</\1>|\Z)", re.DOTALL | re.IGNORECASE)


class ParseFailure(Exception):
    """The answer is not the JSON we asked for; the message is what a re-ask quotes."""


def strip_thinking(text: str) -> str:
    return THINKING.sub("", text) if "<" in text else text


class NotFinite(ValueError):
    """A number JSON cannot hold (NaN, Infinity, or too large for a float): not the JSON asked for
    (a schema's `minimum` never refuses NaN, and NaN written out is not JSON)."""


def _finite_float(text: str) -> float:
    """A JSON number, or NaN / Infinity / -Infinity (parsed as the floats they name), if finite."""
    number = float(text)
    if not math.isfinite(number):
        raise NotFinite(text)
    return number


# strict=False: raw control characters inside strings, as grammar-constrained local servers
# emit them, are read as the characters they are. One decoder for every answer, made once.
LENIENT = json.JSONDecoder(strict=False, parse_constant=_finite_float, parse_float=_finite_float)


def json_candidates(text: str) -> list[str]:
    """The ladder: ```json block, any fenced block, first `{` to last `}`, raw text."""
    text = strip_thinking(text)
    out = []
    if "```" in text:
        out += [m.group(1) for m in FENCED_JSON.finditer(text)]
        out += [m.group(1) for m in FENCED_ANY.finditer(text)]
    first, last = text.find("{"), text.rfind("}")
    if first != -1 and last > first:
        out.append(text[first:last + 1])
    out.append(text)
    return [c.strip() for c in out]


def extract_json(text: str) -> Any:
    errors: list[str] = []
    for candidate in json_candidates(text):
        try:
            return LENIENT.decode(candidate)
        except json.JSONDecodeError as exc:
            errors.append(f"{exc.msg} at line {exc.lineno} column {exc.colno}")
        except NotFinite as exc:
            raise ParseFailure(f"the answer holds {str(exc)[:40]}, not a finite number; answer with "
                               "numbers JSON allows") from None
        except ValueError as exc:             # an integer past Python's digit limit
            errors.append(str(exc)[:80])
        except RecursionError:
            errors.append("nested too deeply")
    raise ParseFailure(f"the answer is not valid JSON ({errors[-1]}); answer with one JSON object only")


MAX_VALIDATORS = 256      # schemas whose validator is kept (a step's schema is one; rendered ones may be many)
_VALIDATORS: dict[str, Validator] = {}
_BY_OBJECT: dict[int, tuple[dict[str, Any], Validator]] = {}


def validator_for(schema: dict[str, Any]) -> Validator:
    """The jsonschema validator of `schema`, made once: found by the schema object (a step's schema
    file is one object for all its calls), else by its JSON text (equal rendered schemas share one)."""
    known = _BY_OBJECT.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    from jsonschema import Draft202012Validator  # only answers that were not cached are checked
    text = json.dumps(schema, default=str)
    validator = _VALIDATORS.get(text)
    if validator is None:
        if len(_VALIDATORS) >= MAX_VALIDATORS:
            _VALIDATORS.clear()
        validator = _VALIDATORS[text] = Draft202012Validator(schema)
    if len(_BY_OBJECT) >= MAX_VALIDATORS:
        _BY_OBJECT.clear()
    _BY_OBJECT[id(schema)] = (schema, validator)     # the object kept: its id is not reused while listed
    return validator


def validate(value: Any, schema: dict[str, Any]) -> None:
    """ParseFailure naming the first five errors, by path, when `value` does not match."""
    from runner.checks.json_schema import schema_message
    errors = sorted(((list(e.absolute_path), schema_message(e)) for e in validator_for(schema).iter_errors(value)),
                    key=lambda error: error[0])
    if errors:
        parts = [f"{'/'.join(str(p) for p in path) or '(root)'}: {message}" for path, message in errors[:5]]
        raise ParseFailure("the answer does not match the required schema: " + "; ".join(parts))


def parse_answer(text: str, schema: dict[str, Any] | None, as_json: bool) -> Any:
    if not as_json and schema is None:
        return strip_thinking(text).strip() if "<" in text else text
    value = extract_json(text)
    if schema is not None:
        validate(value, schema)
    return value
