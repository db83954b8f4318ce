"""The verdict analyzer against the scripted model (one run through the fake server, by
litellm's ollama_chat route)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakellm import Reply
from helpers import run, scripted_seats, write_json

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "pipelines" / "verdict_analyzer.yaml"
RATIONALE = "Several randomized trials agree, and the meta-analysis is consistent."


def record(text: str, order: int = 1, summary: str = "Trials found a consistent effect.") -> dict:
    return {"statement": {"text": text, "context": "", "statement_type": "finding", "confidence": 0.9,
                          "statement_order": order},
            "counter_report": {"summary": summary, "num_citations": 2, "citations": [],
                               "search_stats": {"documents_found": 10, "documents_scored": 5,
                                                "citations_extracted": 2}}}


def verdict_json(verdict: str, confidence: str = "high", rationale: str = RATIONALE) -> str:
    return json.dumps({"verdict": verdict, "confidence": confidence, "rationale": rationale})


def analyzing(project, seat):
    def go(records: list[dict], out: str = "out"):
        source = write_json(project.root / f"{out}.json", records)
        return run(PIPELINE, source, out=project.root / out, cache_dir=project.root / "cache",
                   overrides=[*seat, "models.analyst.backoff=0.01"])
    return go


@pytest.fixture
def analyze(project, scripted_llm):
    """The pipeline with the scripted model as its analyst."""
    return analyzing(project, scripted_seats("analyst"))


@pytest.fixture
def analyze_over_http(project, fake_llm):
    """The pipeline with the fake server as its analyst (Ollama's protocol, through litellm):
    one run end to end through HTTP."""
    return analyzing(project, [f"models.analyst.api_base={fake_llm.url.rsplit('/v1', 1)[0]}"])


@pytest.mark.xdist_group("litellm")      # litellm imported by one worker only
def test_each_verdict_and_confidence(analyze_over_http, fake_llm):
    fake_llm.script(verdict_json("supports", "high"), contains="Statement A")
    fake_llm.script(verdict_json("contradicts", "medium"), contains="Statement B")
    fake_llm.script(verdict_json("undecided", "low"), contains="Statement C")
    outcome = analyze_over_http([record("Statement A", 1), record("Statement B", 2), record("Statement C", 3)])
    got = [(r["verdict"], r["confidence"], r["rationale"]) for r in outcome.results]
    assert got == [("supports", "high", RATIONALE), ("contradicts", "medium", RATIONALE),
                   ("undecided", "low", RATIONALE)]
    meta = outcome.results[1]["analysis_metadata"]
    assert meta["model"] == "gpt-oss:20b" and meta["temperature"] == 0.3 and meta["statement_order"] == 2
    assert meta["timestamp"].endswith("+00:00")
    (request,) = fake_llm.calls(contains='"Statement A"')
    assert request.model == "gpt-oss:20b" and request.body["options"]["temperature"] == 0.3
    assert '"Statement A"' in request.prompt and "Documents found: 10" in request.prompt


@pytest.mark.parametrize("wrapped", [
    verdict_json("contradicts"),
    "```json\n" + verdict_json("contradicts") + "\n```",
    "```\n" + verdict_json("contradicts") + "\n```",
    "Here is my analysis: " + verdict_json("contradicts") + " I hope this helps.",
])
def test_each_json_wrapping(analyze, scripted_llm, wrapped):
    scripted_llm.script(wrapped)
    assert analyze([record("Statement")]).results[0]["verdict"] == "contradicts"


@pytest.mark.parametrize("answer,message", [
    (json.dumps({"verdict": "supports", "confidence": "high"}), "'rationale' is a required property"),
    (verdict_json("refutes"), "verdict: 'refutes' is not one of ['supports', 'contradicts', 'undecided']"),
    (verdict_json("supports", "certain"), "confidence: 'certain' is not one of ['high', 'medium', 'low']"),
    (verdict_json("supports", rationale="Too short."), "rationale: 'Too short.' is too short"),
])
def test_validation_failures_are_not_retried(analyze, scripted_llm, answer, message):
    scripted_llm.script(answer)
    result = analyze([record("Statement")]).results[0]
    assert message in result["error"]
    assert "verdict" not in result
    assert len(scripted_llm.requests) == 1


def test_a_transient_503_is_retried(analyze, scripted_llm):
    scripted_llm.script(Reply(status=503), Reply(verdict_json("supports")))
    assert analyze([record("Statement")]).results[0]["verdict"] == "supports"
    assert len(scripted_llm.requests) == 2


def test_empty_input_fails_without_a_request(analyze, scripted_llm):
    scripted_llm.script(verdict_json("supports"))
    outcome = analyze([record(""), record("   "), record("Fine", summary=""), record("Fine too")])
    errors = [r.get("error") for r in outcome.results]
    assert errors[0] == errors[1] == "step 'statement_check': invalid input: the statement text is empty"
    assert errors[2] == "step 'summary_check': invalid input: the counter-report summary is empty"
    assert errors[3] is None and outcome.results[3]["verdict"] == "supports"
    assert len(scripted_llm.requests) == 1
    assert outcome.summary["errors"] == 3 and outcome.summary["analyzed"] == 1


@pytest.mark.parametrize("verdicts,expected", [
    ([], "No statements were analyzed."),
    (["supports", "supports"], "All 2 statement(s) were supported by the available evidence."),
    (["contradicts"], "All 1 statement(s) were contradicted by the available evidence."),
    (["undecided", "undecided", "undecided"], "Evidence for all 3 statement(s) was mixed or insufficient."),
    (["contradicts", "contradicts", "supports"],
     "The majority of statements (2/3) were contradicted by the available evidence."),
    (["supports", "supports", "undecided"], "The majority of statements (2/3) were supported by the available evidence."),
    (["supports", "contradicts", "undecided", "undecided"],
     "Mixed results across 4 statements: 1 supported, 1 contradicted, 2 undecided."),
])
def test_overall_assessment_texts(analyze, scripted_llm, verdicts, expected):
    for number, verdict in enumerate(verdicts):
        scripted_llm.script(verdict_json(verdict), contains=f"Statement {number}.")
    records = [record(f"Statement {n}.", n) for n in range(len(verdicts))] + [record("")]   # one error
    outcome = analyze(records)
    assert outcome.summary["overall_assessment"] == expected
    assert outcome.summary["errors"] == 1
    assert f"**Assessment:** {expected}" in (outcome.out_dir / "report.md").read_text()
