"""Answer parsing: the JSON ladder, then the output schema."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

FENCED_JSON = re.compile(r"```json\s*\n?(.*?)```", re.DOTALL | re.IGNORECASE)
FENCED_ANY = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
# A reasoning model's thoughts are not its answer (an unclosed block runs to the end).
THINKING = re.compile(r"<(think|thinking|reasoning)>.*?(</\1>|\Z)", re.DOTALL | re.IGNORECASE)


class ParseFailure(Exception):
    """The answer is not the JSON we asked for; the message is what a re-ask quotes."""


def strip_thinking(text: str) -> str:
    return THINKING.sub("", text) if "<" in text else text


# strict=False: raw control characters inside strings, as grammar-constrained local servers
# emit them, are read as the characters they are. One decoder for every answer:
# json.loads(text, strict=False) builds a new one each time (half of its 2.8 us).
LENIENT = json.JSONDecoder(strict=False)


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
    errors = []
    for candidate in json_candidates(text):
        try:
            return LENIENT.decode(candidate)
        except json.JSONDecodeError as exc:
            errors.append(exc)
    raise ParseFailure(f"the answer is not valid JSON ({errors[-1].msg} at line {errors[-1].lineno} "
                       f"column {errors[-1].colno}); answer with one JSON object only")


# Keys after which a property's subschema no longer stands alone: references, and the
# identifiers and dialects they resolve against.
_REFERENCES = frozenset({"$ref", "$dynamicRef", "$recursiveRef"})
_IDENTIFIERS = frozenset({"$id", "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$schema"})


class AnswerSchema:
    """An output schema's checks, made by jsonschema. When each property's subschema stands
    alone, the root and each property get a validator of their own: the root's with those
    properties set to `true` (so `additionalProperties` still sees their names), each
    property's run on its value. Same errors, messages and paths; but jsonschema no longer
    builds a validator per property per answer (`descend` evolves one each time), which was
    half of what checking an answer cost (24 us for the citation verdict, 10 us split). A
    plain subschema that passes is passed without jsonschema's walk (`_plain_check`)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        from jsonschema import Draft202012Validator  # only answers that were not cached are checked
        properties = schema.get("properties") if isinstance(schema, dict) else None
        if isinstance(properties, dict) and properties and _stands_alone(schema, properties):
            # `true`, `false` and `{}` stay: nothing to save, and jsonschema reports a `false`
            # property's error without its path, which a validator of its own would add.
            alone = {name: sub for name, sub in properties.items() if isinstance(sub, dict) and sub}
            root = {**schema, "properties": {**properties, **dict.fromkeys(alone, True)}}
            self.root = Draft202012Validator(root)
            self.properties = [(name, Draft202012Validator(sub)) for name, sub in alone.items()]
            self._passes = {name: passes for name, sub in alone.items() if (passes := _plain_check(sub)) is not None}
            self._root_passes = _plain_object_check(root)
        else:
            self.root = Draft202012Validator(schema)
            self.properties = []
            self._passes, self._root_passes = {}, None

    def errors(self, value: Any) -> list[tuple[list[str | int], str]]:
        """(path, message) of each error, in jsonschema's order."""
        if self._root_passes is not None and self._root_passes(value):
            found = []
        else:
            found = [(list(error.absolute_path), error.message) for error in self.root.iter_errors(value)]
        if isinstance(value, dict):         # `properties` applies to objects only
            for name, check in self.properties:
                if name in value:
                    passes = self._passes.get(name)
                    if passes is not None and passes(value[name]):
                        continue
                    found += [([name, *error.absolute_path], error.message) for error in check.iter_errors(value[name])]
        return found


# A plain subschema's yes, without jsonschema's walk: a yes is exactly jsonschema's "no
# error" (its own type checker, and its reading of `enum`, `required` and the lengths of a
# string); a no, or any other keyword, is left to jsonschema, which words every message. Most
# answers pass, and the walk was most of checking one (15.6 us for the citation verdict, 2.5 us).
_NOTES = frozenset({"$schema", "$comment", "title", "description", "examples", "default", "deprecated", "readOnly",
                    "writeOnly"})
_JSON_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
Passes = Callable[[Any], bool]


def _plain_check(schema: dict[str, Any]) -> Passes | None:
    """For a subschema of one `type` name (a string's with `minLength`/`maxLength`), or an
    `enum` of strings only, and notes."""
    from jsonschema import Draft202012Validator
    keys = set(schema) - _NOTES
    kind = schema.get("type")
    if keys == {"enum"} and isinstance(schema["enum"], list) and all(isinstance(v, str) for v in schema["enum"]):
        names = frozenset(schema["enum"])     # jsonschema's equal() of two texts is ==; of a text and a non-text, no
        return lambda value: isinstance(value, str) and value in names
    if "type" not in keys or not isinstance(kind, str) or kind not in _JSON_TYPES:
        return None
    is_type = Draft202012Validator.TYPE_CHECKER.is_type
    if keys == {"type"}:
        return lambda value: is_type(value, kind)
    least, most = schema.get("minLength", 0), schema.get("maxLength")
    lengths_only = keys <= {"type", "minLength", "maxLength"} and kind == "string"
    if not lengths_only or not all(type(n) is int for n in (least, most) if n is not None):
        return None
    return lambda value: isinstance(value, str) and least <= len(value) and (most is None or len(value) <= most)


def _plain_object_check(schema: dict[str, Any]) -> Passes | None:
    """For a root of `type: object`, `required` names and properties that check nothing (each
    checked on its own), and notes."""
    keys = set(schema) - _NOTES
    required = schema.get("required", [])
    properties = schema.get("properties", {})
    if not keys <= {"type", "required", "properties"} or schema.get("type") != "object" \
            or not isinstance(required, list) or not all(isinstance(name, str) for name in required) \
            or not isinstance(properties, dict) or not all(sub is True or sub == {} for sub in properties.values()):
        return None
    return lambda value: isinstance(value, dict) and all(name in value for name in required)


def _stands_alone(schema: dict[str, Any], properties: dict[str, Any]) -> bool:
    """No reference anywhere, no identifier in a property's subschema, and nothing at the
    root that depends on how the properties were evaluated."""
    if "unevaluatedProperties" in schema or _has_key(schema, _REFERENCES):
        return False
    return not any(_has_key(sub, _IDENTIFIERS) for sub in properties.values())


def _has_key(value: Any, keys: frozenset[str]) -> bool:
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, dict):
            if not keys.isdisjoint(current):
                return True
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
    return False


_SCHEMAS: dict[int, tuple[dict[str, Any], AnswerSchema]] = {}


def answer_schema(schema: dict[str, Any]) -> AnswerSchema:
    """One set of validators per schema object (steps share their loaded schemas)."""
    known = _SCHEMAS.get(id(schema))
    if known is None or known[0] is not schema:
        known = _SCHEMAS[id(schema)] = (schema, AnswerSchema(schema))
    return known[1]


def validate(value: Any, schema: dict[str, Any]) -> None:
    errors = sorted(answer_schema(schema).errors(value), key=lambda error: error[0])
    if errors:
        parts = []
        for path, message in errors[:5]:
            where = "/".join(str(p) for p in path) or "(root)"
            parts.append(f"{where}: {message}")
        raise ParseFailure("the answer does not match the required schema: " + "; ".join(parts))


def parse_answer(text: str, schema: dict[str, Any] | None, as_json: bool) -> Any:
    if not as_json and schema is None:
        return strip_thinking(text).strip() if "<" in text else text
    value = extract_json(text)
    if schema is not None:
        validate(value, schema)
    return value
