"""Deep judgment against the scripted model (one run through the fake server): excerpts checked against the response,
re-asked with feedback, reasoning, parse, verification, abstention and auto-fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run, scripted_seats, write_json

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "pipelines" / "deep_judgment.yaml"
RESPONSE = ("In the ATLAS-2 trial, patients received ZX-41 at 40 mg once daily for 12 weeks. "
            "The primary endpoint was met: systolic blood pressure fell by 11.2 mmHg compared with placebo.")
RECORD = {"question": "What did ATLAS-2 find?", "response": RESPONSE,
          "template": {"attributes": {"dose_mg": {"type": "number", "description": "Daily dose"},
                                      "endpoint_met": {"type": "boolean", "description": "Primary endpoint met"}}},
          "expected": {"dose_mg": 40, "endpoint_met": True}}
EXTRACT, RETRY, REASON = "You extract evidence", "could not be found in the response", "explain in one or two"
PARSE, ABSTAIN = "Fill the attributes below", "decline to answer"
GOOD = {"dose_mg": [{"text": "ZX-41 at 40 mg once daily", "confidence": "high"}],
        "endpoint_met": [{"text": "The primary endpoint was met", "confidence": "high"}]}
PARAPHRASE = [{"text": "the main study goal was successfully reached", "confidence": "medium"}]


def excerpts(value: dict) -> str:
    return json.dumps({"excerpts": value})


def judging(project, seat):
    def go(records, *extra, out="out"):
        source = write_json(project.root / "in.json", records)
        return run(PIPELINE, source, out=project.root / out, cache_dir=project.root / "cache",
                   overrides=[*seat, "models.parser.retries=0", *extra])
    return go


@pytest.fixture
def judge(project, scripted_llm):
    """The pipeline with the scripted model as its parser."""
    return judging(project, scripted_seats("parser"))


@pytest.fixture
def judge_over_http(project, fake_llm):
    """The pipeline with the fake server as its parser: one run end to end through HTTP."""
    return judging(project, [f"models.parser.api_base={fake_llm.url}"])


def script_common(fake_llm, abstained=False, parsed=None):
    fake_llm.script(json.dumps({"reasoning": {"dose_mg": "stated as 40 mg", "endpoint_met": "stated as met"}}),
                    contains=REASON)
    fake_llm.script(json.dumps(parsed or {"dose_mg": 40, "endpoint_met": True}), contains=PARSE)
    fake_llm.script(json.dumps({"abstained": abstained, "reason": "answered" if not abstained else "declined"}),
                    contains=ABSTAIN)


def test_all_excerpts_valid(judge_over_http, fake_llm):
    fake_llm.script(excerpts(GOOD), contains=EXTRACT)
    script_common(fake_llm)
    result = judge_over_http([RECORD]).results[0]
    dj = result["deep_judgment"]
    assert dj["deep_judgment_performed"] is True
    assert dj["extracted_excerpts"]["dose_mg"] == [{"text": "ZX-41 at 40 mg once daily", "confidence": "high",
                                                     "similarity_score": 1.0}]
    assert dj["attributes_without_excerpts"] == [] and dj["deep_judgment_excerpt_retry_count"] == 0
    assert dj["deep_judgment_model_calls"] == 4
    assert dj["deep_judgment_stages_completed"] == ["excerpts", "reasoning", "parameters"]
    assert dj["attribute_reasoning"]["dose_mg"] == "stated as 40 mg"
    assert dj["hallucination_risk_assessment"] is None
    assert result["parsed"] == {"dose_mg": 40, "endpoint_met": True}
    assert result["verify_result"] is True
    assert result["field_verification_result"] == {"dose_mg": True, "endpoint_met": True}
    assert result["abstention_detected"] is False and "warnings" not in result
    assert fake_llm.calls(contains=RETRY) == []
    parse_prompt = fake_llm.calls(contains=PARSE)[0].prompt
    assert '"ZX-41 at 40 mg once daily"' in parse_prompt and "stated as 40 mg" in parse_prompt


def test_paraphrase_is_retried_with_feedback_then_fixed(judge, scripted_llm):
    scripted_llm.script(excerpts({**GOOD, "endpoint_met": PARAPHRASE}), contains=EXTRACT)
    scripted_llm.script(excerpts({"endpoint_met": [{"text": "The primary endpoint was met", "confidence": "high"}]}),
                    contains=RETRY)
    script_common(scripted_llm)
    result = judge([RECORD]).results[0]
    dj = result["deep_judgment"]
    assert dj["deep_judgment_excerpt_retry_count"] == 1 and dj["deep_judgment_model_calls"] == 5
    assert dj["extracted_excerpts"]["endpoint_met"][0]["text"] == "The primary endpoint was met"
    assert dj["attributes_without_excerpts"] == [] and result["verify_result"] is True
    (retry,) = scripted_llm.calls(contains=RETRY)
    assert 'attribute "endpoint_met"' in retry.prompt
    assert '- "the main study goal was successfully reached": not found in the source' in retry.prompt
    assert RESPONSE in retry.prompt


def test_never_fixed_auto_fails_with_counts(judge, scripted_llm):
    scripted_llm.script(excerpts({**GOOD, "endpoint_met": PARAPHRASE}), contains=EXTRACT)
    scripted_llm.script(excerpts({"endpoint_met": [{"text": "the trial was a triumph", "confidence": "low"}]}),
                    contains=RETRY)
    script_common(scripted_llm)
    result = judge([RECORD]).results[0]
    dj = result["deep_judgment"]
    assert dj["attributes_without_excerpts"] == ["endpoint_met"]
    assert dj["deep_judgment_excerpt_retry_count"] == 2 and dj["deep_judgment_model_calls"] == 6
    assert len(scripted_llm.calls(contains=RETRY)) == 2
    second = scripted_llm.calls(contains=RETRY)[1].prompt
    assert '"the trial was a triumph"' in second                              # quotes the previous failure
    assert result["verify_result"] is False and result["field_verification_result"] is False
    assert result["warnings"] == ["Deep judgment auto-fail: no verbatim excerpt found for endpoint_met"]
    assert dj["extracted_excerpts"]["dose_mg"]                                # the other attribute is unaffected


def test_abstention_overrides_auto_fail(judge, scripted_llm):
    record = {"response": "I'm sorry, I don't know the half-life of ZX-41.",
              "template": {"attributes": {"half_life_hours": {"type": "number"}}}}
    scripted_llm.script(excerpts({"half_life_hours": [{"text": "", "confidence": "none"}]}), contains=EXTRACT)
    scripted_llm.script(json.dumps({"reasoning": {"half_life_hours": "not given"}}), contains=REASON)
    scripted_llm.script(json.dumps({"half_life_hours": None}), contains=PARSE)
    scripted_llm.script(json.dumps({"abstained": True, "reason": "declined"}), contains=ABSTAIN)
    result = judge([record]).results[0]
    assert result["abstention_detected"] is True
    assert result["deep_judgment"]["attributes_without_excerpts"] == ["half_life_hours"]
    assert result["verify_result"] is None and "warnings" not in result
    assert scripted_llm.calls(contains=RETRY) == []                               # 'none' excerpts are not retried


def test_standard_parsing_when_disabled(judge, scripted_llm):
    script_common(scripted_llm)
    result = judge([RECORD], "params.deep_judgment_enabled=false").results[0]
    assert len(scripted_llm.requests) == 1 and PARSE in scripted_llm.requests[0].prompt
    assert "EVIDENCE" not in scripted_llm.requests[0].prompt
    dj = result["deep_judgment"]
    assert dj["deep_judgment_performed"] is False and dj["deep_judgment_model_calls"] == 1
    assert dj["extracted_excerpts"] == {} and dj["attributes_without_excerpts"] == []
    assert result["verify_result"] is True


def test_verify_against_expected(judge, scripted_llm):
    scripted_llm.script(excerpts(GOOD), contains=EXTRACT)
    script_common(scripted_llm, parsed={"dose_mg": 20, "endpoint_met": True})
    result = judge([RECORD]).results[0]
    assert result["verify_result"] is False
    assert result["field_verification_result"] == {"dose_mg": False, "endpoint_met": True}


def test_parse_schema_comes_from_the_template(judge, scripted_llm):
    scripted_llm.script(excerpts(GOOD), contains=EXTRACT)
    script_common(scripted_llm, parsed={"dose_mg": "forty", "endpoint_met": True})
    result = judge([RECORD], "params.parse_repair_attempts=0").results[0]
    assert "dose_mg: 'forty' is not of type 'number', 'null'" in result["error"]
    assert result["deep_judgment"]["deep_judgment_performed"] is True         # what was computed is kept


def test_extraction_failure_degrades_gracefully(judge, scripted_llm):
    scripted_llm.script("no json", contains=EXTRACT)
    script_common(scripted_llm)
    result = judge([RECORD]).results[0]
    dj = result["deep_judgment"]
    assert sorted(dj["attributes_without_excerpts"]) == ["dose_mg", "endpoint_met"]
    assert dj["deep_judgment_stages_completed"] == ["reasoning", "parameters"]
    assert result["verify_result"] is False        # what it could judge is kept, and the failed call is its error
    assert "not valid JSON" in result["error"]
