"""Answers are checked against their output schema by jsonschema, split per property when the
schema allows (parsing.AnswerSchema): the errors, their paths and the message a re-ask quotes
must be exactly what one whole-schema validator gives."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from runner.llm.parsing import AnswerSchema, ParseFailure, validate

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
SPLIT = [VERDICT, CLOSED, NESTED]

WHOLE = [
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


@pytest.mark.parametrize("schema", SPLIT + WHOLE)
@pytest.mark.parametrize("answer", ANSWERS)
def test_an_answer_gets_the_errors_and_message_of_the_whole_schema(schema, answer):
    split = AnswerSchema(schema).errors(answer)
    assert sorted(split, key=repr) == sorted(whole_errors(schema, answer), key=repr)
    assert message(schema, answer) == whole_message(schema, answer)


@pytest.mark.parametrize("schema", SPLIT)
def test_a_schema_whose_properties_stand_alone_is_checked_per_property(schema):
    split = AnswerSchema(schema)
    checked = {name for name, sub in schema["properties"].items() if isinstance(sub, dict)}
    assert {name for name, _ in split.properties} == checked


@pytest.mark.parametrize("schema", WHOLE)
def test_references_identifiers_and_unevaluated_properties_keep_one_validator(schema):
    assert AnswerSchema(schema).properties == []


def test_a_wrong_property_is_named_with_its_path():
    with pytest.raises(ParseFailure) as failure:
        validate({"values": [{"name": "a", "value": "x"}]}, NESTED)
    assert str(failure.value) == ("the answer does not match the required schema: "
                                  "values/0/value: 'x' is not of type 'number', 'null'")
