"""Answers are checked against their output schema by one jsonschema validator per schema
(parsing.validate): the message a re-ask quotes names the first five errors by path."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from jsonschema import Draft202012Validator

from runner.llm.client.parsing import ParseFailure, validate

VERDICT = {
    "type": "object",
    "required": ["verdict", "supports_claim", "reason"],
    "properties": {
        "verdict": {"enum": ["VALID", "MISLEADING", "UNSUPPORTED"]},
        "supports_claim": {"type": "boolean"},
        "reason": {"type": "string", "minLength": 1},
    },
}
CLOSED = {**VERDICT, "additionalProperties": False}
NESTED = {
    "type": "object",
    "required": ["values"],
    "properties": {
        "values": {"type": "array", "minItems": 1,
                   "items": {"type": "object", "required": ["name", "value"],
                             "properties": {"name": {"type": "string"}, "value": {"type": ["number", "null"]}},
                             "additionalProperties": False}},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "never": False,
        "anything": True,
    },
    "allOf": [{"if": {"required": ["confidence"]}, "then": {"required": ["values", "confidence"]}}],
    "minProperties": 1,
}
# One type of each kind, texts' lengths, enums of texts, notes and unknown keywords.
PLAIN = {
    "$schema": "https://json-schema.org/draft/2020-12/schema", "title": "plain", "description": "notes only",
    "type": "object",
    "required": ["verdict", "flag"],
    "properties": {
        "verdict": {"enum": ["VALID", "MISLEADING"], "description": "a note"},
        "flag": {"type": "boolean"}, "count": {"type": "integer"}, "score": {"type": "number"},
        "items": {"type": "array"}, "nested": {"type": "object"}, "nothing": {"type": "null"},
        "reason": {"type": "string", "minLength": 1, "maxLength": 5},
        "mixed": {"enum": ["1", 1, True, None]},
        "odd": {"type": "string", "minLength": 1.5},
        "unknown_keyword": {"type": "string", "nullable": True},
        "several": {"type": ["string", "null"]},
    },
}
PLAIN_ANSWER = {"verdict": "VALID", "flag": True, "count": 2, "score": 0.5, "items": [], "nested": {}, "nothing": None,
                "reason": "ok", "mixed": 1, "odd": "xy", "unknown_keyword": "text", "several": None}
PLAIN_ROOTS = [{**PLAIN, "required": ["verdict", 7]}, {**PLAIN, "type": ["object"]}, {**PLAIN, "maxProperties": 3},
               {**PLAIN, "properties": {**PLAIN["properties"], "never": False}}]
REFERENCING = [
    {"$defs": {"verdict": {"enum": ["VALID", "UNSUPPORTED"]}}, "type": "object",
     "properties": {"verdict": {"$ref": "#/$defs/verdict"}, "reason": {"type": "string"}}},
    {**VERDICT, "unevaluatedProperties": False},
    {**VERDICT, "properties": {**VERDICT["properties"], "reason": {"$id": "https://example.com/reason",
                                                                   "type": "string"}}},
    {"type": "array", "items": {"type": "integer"}},
]

ANSWERS: list[Any] = [
    {"verdict": "VALID", "supports_claim": True, "reason": "the source says so"},
    {"verdict": "valid", "supports_claim": "yes", "reason": ""},
    {"verdict": "VALID"},
    {"verdict": "VALID", "supports_claim": False, "reason": "r", "extra": 1},
    {},
    [],
    ["VALID"],
    "VALID",
    None,
    3,
    {"values": []},
    {"values": [{"name": "revenue", "value": 3.2}, {"name": 7, "value": "3.2", "unit": "M"}, {}]},
    {"values": [{"name": "a", "value": None}], "confidence": 1.5, "never": 1, "anything": {"x": [1]}},
    {"confidence": 0.4},
    [1, "2", 3.5],
    PLAIN_ANSWER,
    {"verdict": "VALID", "flag": 1, "count": True, "score": True, "items": {}, "nested": [], "nothing": 0,
     "reason": "", "mixed": "True", "odd": "x", "unknown_keyword": 3, "several": 1},
    {"verdict": "VALID", "flag": False, "count": 2.0, "score": 3, "reason": "toolong", "mixed": True},
    {"verdict": ["VALID"], "flag": None, "count": 2.5, "score": "1", "reason": 5, "mixed": 1.0},
    {"flag": True, "verdict": "VALID", "extra": {"never": 1}, "never": 1},
]


def whole_errors(schema: dict[str, Any], answer: Any) -> list[tuple[list[str | int], str]]:
    return [(list(e.absolute_path), e.message) for e in Draft202012Validator(schema).iter_errors(answer)]


def whole_message(schema: dict[str, Any], answer: Any) -> str | None:
    """What validate() said when one validator checked the whole schema."""
    errors = sorted(whole_errors(schema, answer), key=lambda error: error[0])
    if not errors:
        return None
    return "the answer does not match the required schema: " + "; ".join(
        f"{'/'.join(str(p) for p in path) or '(root)'}: {message}" for path, message in errors[:5])


def message(schema: dict[str, Any], answer: Any) -> str | None:
    try:
        validate(answer, schema)
    except ParseFailure as failure:
        return str(failure)
    return None


@pytest.mark.parametrize("schema", [VERDICT, CLOSED, NESTED, PLAIN, *PLAIN_ROOTS, *REFERENCING])
@pytest.mark.parametrize("answer", ANSWERS)
def test_an_answer_gets_the_errors_of_its_schema_sorted_by_path(schema, answer):
    assert message(schema, answer) == whole_message(schema, answer)


def test_a_wrong_property_is_named_with_its_path():
    with pytest.raises(ParseFailure) as failure:
        validate({"values": [{"name": "a", "value": "x"}]}, NESTED)
    assert str(failure.value) == ("the answer does not match the required schema: "
                                  "values/0/value: 'x' is not of type 'number', 'null'")


def test_at_most_five_errors_are_quoted():
    schema = {"type": "object", "properties": {name: {"type": "integer"} for name in "abcdefg"}}
    with pytest.raises(ParseFailure) as failure:
        validate(dict.fromkeys("abcdefg", "x"), schema)
    assert str(failure.value).count("is not of type 'integer'") == 5
    assert "a: 'x'" in str(failure.value) and "f: 'x'" not in str(failure.value)


def test_one_validator_is_made_per_schema(monkeypatch):
    made: list[Any] = []
    real = jsonschema.Draft202012Validator

    def counted(schema: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(schema)
        return real(schema, *args, **kwargs)

    monkeypatch.setattr(jsonschema, "Draft202012Validator", counted)
    schema = {"type": "object", "required": ["counted_once"]}
    for _ in range(3):
        with pytest.raises(ParseFailure):
            validate({}, schema)
        validate({"counted_once": 1}, dict(schema))          # an equal schema, another object
    assert made == [schema]
