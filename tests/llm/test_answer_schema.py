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
# Plain subschemas, each passed without jsonschema's walk when it passes (parsing._plain_check):
# one type of each kind, texts' lengths, enums of texts; and look-alikes that are not plain.
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
SPLIT = [VERDICT, CLOSED, NESTED, PLAIN, *PLAIN_ROOTS]

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


def test_plain_subschemas_are_passed_without_jsonschema_and_the_rest_are_not(monkeypatch):
    checked = AnswerSchema(PLAIN)
    assert set(checked._passes) == {"verdict", "flag", "count", "score", "items", "nested", "nothing", "reason"}
    assert checked._root_passes is not None
    assert all(AnswerSchema(root)._root_passes is None for root in PLAIN_ROOTS)
    walked: list[str] = []

    class Walked:
        def __init__(self, name: str, check: Any) -> None:
            self.name, self.check = name, check

        def iter_errors(self, value: Any) -> Any:
            walked.append(self.name)
            return self.check.iter_errors(value)

    checked.properties = [(name, Walked(name, check)) for name, check in checked.properties]
    assert checked.errors(PLAIN_ANSWER) == [] and walked == ["mixed", "odd", "unknown_keyword", "several"]
    walked.clear()
    assert [path for path, _ in checked.errors({**PLAIN_ANSWER, "flag": 1})] == [["flag"]] and walked[0] == "flag"
