"""The evidence judge against the scripted model (its summary through the fake server):
hallucination prechecks, the confidence bands, clamping, type mapping, neutral default on
failure, blocking, order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakellm import Reply
from helpers import run, scripted_seats, write_json

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "pipelines" / "evidence_judge.yaml"


def batch(classifications: list[dict], size: int = 4) -> dict:
    return {"section_guidelines": "Only explicit statements count.", "email_context": "Email 1: hello. " * 300,
            "actual_batch_size": size, "classifications": classifications}


def cls(tag: str, confidence: float = 0.9, **extra) -> dict:
    return {"value": tag, "confidence": confidence, "reasoning": f"Reasoning {tag}.", **extra}


def judgment(q: float | None, kind: str = "contextual", valid: bool = True, issue: str | None = None) -> str:
    body = {"is_valid": valid, "evidence_type": kind, "issue": issue}
    if q is not None:
        body["quality_score"] = q
    return json.dumps(body)


def judging(project, seat):
    def go(batches, out="out", extra=()):
        source = write_json(project.root / f"{out}.json", batches)
        return run(PIPELINE, source, out=project.root / out, cache_dir=project.root / "cache",
                   overrides=[*seat, "models.judge.backoff=0.01",
                              "models.judge.retries=0", "models.judge.limits.concurrency=16", *extra])
    return go


@pytest.fixture
def judge(project, scripted_llm):
    """The pipeline with the scripted model as its judge."""
    return judging(project, scripted_seats("judge"))


@pytest.fixture
def judge_over_http(project, fake_llm):
    """The pipeline with the fake server as its judge (Ollama's protocol, through litellm): one
    run end to end through HTTP."""
    return judging(project, [f"models.judge.api_base={fake_llm.url.rsplit('/v1', 1)[0]}"])


def test_hallucination_routes_send_nothing(judge, scripted_llm):
    outcome = judge(batch([cls("A", email_numbers=[1, 7]), cls("B", reasoning="As EMAIL 12 shows, and email 2."),
                           cls("C", reasoning="Email 4 and Email 40 agree.", email_numbers=[2])]))
    a, b, c = outcome.results
    assert a["evidence_issue"] == "HALLUCINATION: Reasoning cites Email 7 but batch only contains 4 emails."
    assert b["evidence_issue"] == "HALLUCINATION: Reasoning cites 'Email 12' but batch only contains 4 emails."
    assert c["evidence_issue"] == "HALLUCINATION: Reasoning cites 'Email 40' but batch only contains 4 emails."
    for result in (a, b, c):
        assert (result["evidence_quality"], result["evidence_type"], result["is_valid"]) == (0.0, "inappropriate", False)
        assert result["confidence"] == 0.0 and result["blocked"] is True and result["warning"] is True
    assert scripted_llm.requests == []
    assert outcome.summary["hallucinations"] == 3 and outcome.summary["blocked"] == 3


def test_word_boundaries_and_batch_size(judge, scripted_llm):
    scripted_llm.script(judgment(1.0, "explicit"))
    outcome = judge(batch([cls("A", reasoning="See Emails 9 and myEmail 9 and Email 4."), cls("B", email_numbers=[4])]))
    assert [r["evidence_type"] for r in outcome.results] == ["explicit", "explicit"]
    assert len(scripted_llm.requests) == 2


@pytest.mark.parametrize("q,kind,expected", [      # the seed's worked numbers, from 0.9
    (1.0, "explicit", 0.9), (0.7, "contextual", 0.765), (0.4, "weak", 0.585), (0.0, "inappropriate", 0.0),
])
def test_seed_worked_numbers(judge, scripted_llm, q, kind, expected):
    scripted_llm.script(judgment(q, kind))
    result = judge(batch([cls("A")])).results[0]
    assert result["confidence"] == pytest.approx(expected)
    assert result["original_confidence"] == 0.9 and result["evidence_quality"] == q


@pytest.mark.parametrize("q,factor", [
    (0.29, 0.29), (0.3, 0.55), (0.5, 0.65), (0.55, 0.55), (0.6, 0.75), (0.8, 0.85), (0.81, 0.81),
])
def test_band_edges(judge, scripted_llm, q, factor):
    scripted_llm.script(judgment(q, "weak"))
    result = judge(batch([cls("A", confidence=0.8)])).results[0]
    assert result["confidence"] == pytest.approx(0.8 * factor)


def test_clamping_and_type_mapping(judge, scripted_llm):
    scripted_llm.script(judgment(1.7, "weak"), contains="Reasoning HIGH.")
    scripted_llm.script(judgment(-0.3, "contextual"), contains="Reasoning NEG.")
    scripted_llm.script(judgment(0.0, "contextual"), contains="Reasoning ZERO.")
    scripted_llm.script(judgment(None, "weak"), contains="Reasoning MISSING.")
    scripted_llm.script(judgment(0.0, "inappropriate", valid=False, issue="products are not age"),
                    contains="Reasoning BAD.")
    results = judge(batch([cls("HIGH"), cls("NEG"), cls("ZERO"), cls("MISSING"), cls("BAD")])).results
    assert [r["evidence_quality"] for r in results] == [1.0, 0.7, 0.7, 0.4, 0.0]
    assert results[4]["evidence_issue"] == "products are not age" and results[4]["blocked"] is True
    assert results[0]["confidence"] == pytest.approx(0.9)


def test_judge_failure_gives_the_neutral_default(judge, scripted_llm):
    scripted_llm.script(Reply(status=500), contains="Reasoning FAIL.")
    scripted_llm.script("not json at all", contains="Reasoning GARBLED.")
    outcome = judge(batch([cls("FAIL"), cls("GARBLED")]))
    for result in outcome.results:
        assert (result["is_valid"], result["evidence_quality"], result["evidence_type"]) == (True, 0.7, "unknown")
        assert result["evidence_issue"].startswith("Judge error: model 'judge' (scripted/judge)")
        assert result["confidence"] == pytest.approx(0.765) and result["blocked"] is False
        assert result["error"]          # the neutral default is kept; the judge's failure is the item's error
    assert "HTTP 500" in outcome.results[0]["evidence_issue"]
    assert "not valid JSON" in outcome.results[1]["evidence_issue"]
    assert outcome.summary["judge_errors"] == 2


@pytest.mark.parametrize("q,blocked", [(0.15, False), (0.149, True)])
def test_block_edge(judge, scripted_llm, q, blocked):
    scripted_llm.script(judgment(q, "weak"))
    assert judge(batch([cls("A")])).results[0]["blocked"] is blocked


def test_results_keep_the_classification_and_its_order(judge, scripted_llm):
    for n in range(10):
        scripted_llm.script(Reply(judgment(1.0, "explicit"), delay=0.05 * (10 - n)), contains=f"Reasoning C{n}.")
    scripted_llm.gather = 5                 # the first answers wait for five in flight: reached however loaded
    classifications = [cls(f"C{n}", taxonomy_id=n, extra_field="kept") for n in range(10)]
    outcome = judge([batch(classifications[:6]), batch(classifications[6:], size=8)])
    assert [r["value"] for r in outcome.results] == [f"C{n}" for n in range(10)]
    assert all(r["extra_field"] == "kept" and r["taxonomy_id"] == n for n, r in enumerate(outcome.results))
    assert scripted_llm.peak_in_flight == 5
    finished = sorted(scripted_llm.requests, key=lambda r: r.finished)
    assert "Reasoning C0." not in finished[0].prompt          # answers did arrive out of order


def test_prompt_shows_guidelines_context_cut_and_batch_size(judge, scripted_llm):
    scripted_llm.script(judgment(1.0, "explicit"))
    judge(batch([cls("A")], size=4))
    request = scripted_llm.requests[0]
    system, user = request.messages[0]["content"], request.messages[1]["content"]
    assert "evidence quality judge" in system
    assert "## Section Evidence Guidelines:\nOnly explicit statements count." in user
    assert "- Taxonomy Value: A\n- Confidence: 0.9\n- Reasoning: Reasoning A." in user
    context = user.split("## Email Context (first 2000 chars of batch):\n")[1].split("...\n")[0]
    assert len(context) == 2000
    assert "NOTE: The agent analyzed a batch of 4 emails." in user
    assert request.body["temperature"] == 0.1


@pytest.mark.xdist_group("litellm")      # litellm imported by one worker only
def test_summary(judge_over_http, fake_llm):
    fake_llm.script(judgment(1.0, "explicit"), contains="Reasoning A.")
    fake_llm.script(judgment(0.4, "weak"), contains="Reasoning B.")
    summary = judge_over_http(batch([cls("A"), cls("B"), cls("C", email_numbers=[5])])).summary
    assert summary["counts"] == {"explicit": 1, "weak": 1, "inappropriate": 1}
    assert summary["blocked"] == 1 and summary["hallucinations"] == 1 and summary["warnings"] == 2
    assert summary["mean_confidence_change"] == pytest.approx(round((0 - 0.315 - 0.9) / 3, 4))
