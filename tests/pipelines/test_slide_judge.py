"""The slide judge: ratings, unknown, errors, the content-hash memo and feedback."""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path

import pytest

from fakellm import Reply
from helpers import copy_example, run, scripted_seats, write_json
from runner.stores.memo import MemoStore

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "pipelines" / "slide_judge.yaml"
EXAMPLE = REPO / "examples" / "slide_judge"

DECK = {
    "session_id": "s1",
    "source_data": [{"query": "SELECT q, revenue FROM kpis", "columns": ["q", "revenue"],
                     "rows": [["Q1", 7234567], ["Q2", 8080000]]}],
    "slides": [
        {"slide_index": 0, "html": "<h1>Slide A</h1><p>Q1 revenue $7.2M</p>"},
        {"slide_index": 1, "html": "<h1>Slide B</h1><p>Q2 revenue $8.1M</p>"},
        {"slide_index": 2, "html": "<h1>Slide C</h1><p>Growth 50%</p>"},
    ],
}


def verdict(rating=None, score=None, explanation="checked", issues=()):
    body = {"explanation": explanation, "issues": list(issues)}
    if rating:
        body["rating"] = rating
    if score is not None:
        body["score"] = score
    return json.dumps(body)


@pytest.fixture
def judge(project, scripted_llm):
    def go(deck, *extra: str, out: str = "out", **options):
        source = write_json(project.root / "deck.json", deck)
        return run(PIPELINE, source, out=project.root / out, cache_dir=project.root / "fresh-cache",
                   overrides=[*scripted_seats("judge"), "models.judge.retries=0", *extra], **options)
    return go


def test_each_rating(judge, scripted_llm):
    scripted_llm.script(verdict("green", 92), contains="Slide A")
    scripted_llm.script(verdict("amber"), contains="Slide B")
    scripted_llm.script(verdict("red", issues=[{"type": "derived", "detail": "growth is 11.7%, not 50%"}]),
                    contains="Slide C")
    results = judge(DECK).results
    assert [(r["rating"], r["score"]) for r in results] == [("green", 92), ("amber", 65), ("red", 25)]
    assert results[2]["issues"] == [{"type": "derived", "detail": "growth is 11.7%, not 50%"}]
    assert [r["slide_index"] for r in results] == [0, 1, 2]
    for result in results:
        assert result["error"] is False and result["error_message"] is None
        assert len(result["content_hash"]) == 16 and len(result["trace_id"]) == 32
        assert isinstance(result["duration_ms"], int) and result["timestamp"].endswith("+00:00")
    assert scripted_llm.requests[0].body["temperature"] == 0


@pytest.mark.parametrize("score,rating", [(80, "green"), (79, "amber"), (50, "amber"), (49.5, "red")])
def test_a_score_without_a_rating_is_rated_by_thresholds(judge, scripted_llm, score, rating):
    scripted_llm.script(verdict(score=score))
    result = judge({**DECK, "slides": DECK["slides"][:1]}).results[0]
    assert (result["rating"], result["score"]) == (rating, score)


def test_no_source_data_is_unknown_without_a_call(judge, scripted_llm):
    outcome = judge({**DECK, "source_data": []})
    assert {(r["rating"], r["score"], r["error"]) for r in outcome.results} == {("unknown", 0, False)}
    assert scripted_llm.requests == []


def test_judge_failure_is_an_error_and_never_stored(judge, scripted_llm, project):
    scripted_llm.script(Reply(status=500), contains="Slide A")
    scripted_llm.script(verdict("green"))
    first = judge(DECK).results
    assert (first[0]["rating"], first[0]["error"]) == ("error", True)
    assert "HTTP 500" in first[0]["error_message"]
    store = dict(MemoStore(project.root / "out" / "verification_map.json").items())
    assert first[0]["content_hash"] not in store and len(store) == 2
    scripted_llm.reset()
    scripted_llm.script(verdict("green"))
    again = judge(DECK).results
    assert again[0]["rating"] == "green" and len(scripted_llm.requests) == 1      # only the failed slide


def test_memo_follows_content(judge, scripted_llm, project):
    scripted_llm.script(verdict("green"))
    first = judge(DECK).results
    assert len(scripted_llm.requests) == 3
    traces = {r["content_hash"]: r["trace_id"] for r in first}

    def rerun(deck):
        scripted_llm.requests.clear()
        return judge(deck)

    edited = copy.deepcopy(DECK)
    edited["slides"][1]["html"] = "<h1>Slide B</h1><p>Q2 revenue $8.08M</p>"
    outcome = rerun(edited)
    assert len(scripted_llm.requests) == 1 and "Slide B" in scripted_llm.requests[0].prompt
    assert outcome.results[0]["trace_id"] == traces[first[0]["content_hash"]]        # reused as stored

    cosmetic = copy.deepcopy(edited)
    cosmetic["slides"][0]["html"] = "<H1>Slide A</H1>\n   <!-- reviewed -->  <p>Q1  REVENUE $7.2M</p>"
    rerun(cosmetic)
    assert scripted_llm.requests == []

    reordered = copy.deepcopy(cosmetic)
    reordered["slides"].reverse()
    for position, slide in enumerate(reordered["slides"]):
        slide["slide_index"] = position
    outcome = rerun(reordered)
    assert scripted_llm.requests == []
    assert [r["slide_index"] for r in outcome.results] == [0, 1, 2]               # position is live
    assert all(r["memo_hit"] for r in outcome.results)

    deleted = copy.deepcopy(reordered)
    del deleted["slides"][1]
    outcome = rerun(deleted)
    assert scripted_llm.requests == [] and len(outcome.results) == 2

    # (hunt) what else the verdict reads: a chart's data, the session's source data
    charted = copy.deepcopy(deleted)
    charted["slides"][0]["scripts"] = "new Chart(ctx, {data: [2.48, 1.79, 9.99]})"
    rerun(charted)
    assert len(scripted_llm.requests) == 1 and "9.99" in scripted_llm.requests[0].prompt
    restated = copy.deepcopy(charted)
    restated["source_data"][0]["rows"] = [[q, v * 2] for q, v in restated["source_data"][0]["rows"]]
    assert len(rerun(restated).results) == 2 and len(scripted_llm.requests) == 2


def test_memo_ignores_the_llm_cache(judge, scripted_llm, project):
    scripted_llm.script(verdict("green"))
    judge(DECK)
    shutil.rmtree(project.root / "fresh-cache")
    scripted_llm.requests.clear()
    from runner.api import ItemSource, run_pipeline
    from runner.runs.request import RunOptions
    options = RunOptions(cache_dir=project.root / "other-cache", out_dir=project.root / "out")
    outcome = run_pipeline(PIPELINE, ItemSource(project.root / "deck.json"), options,
                           [*scripted_seats("judge"), "models.judge.retries=0"])     # the same pipeline
    assert scripted_llm.requests == [] and outcome.summary["memo"]["reused"] == 3


def test_feedback(judge, scripted_llm, project, cli):
    """`runner feedback` writes the one review store (reports/reviews.sqlite), read by
    `runner labels export` as `runner view`'s and serve's reviews are."""
    scripted_llm.script(verdict("green"))
    results = judge(DECK).results
    store = project.root / "out"
    up = cli("feedback", "--store", str(store), "--trace-id", results[0]["trace_id"], "--up")
    assert up.exit_code == 0, up.output
    down = cli("feedback", "--store", str(store), "--trace-id", results[1]["trace_id"], "--down",
               "--label", "amber", "--rationale", "Q2 is 8.08M, not 8.1M")
    assert down.exit_code == 0, down.output
    assert down.stdout == f"feedback recorded for {results[1]['trace_id']} (down)\n"
    assert not (store / "feedback.jsonl").exists()
    exported = cli("labels", "export", "reports", "--pipeline", "slide_judge")
    assert exported.exit_code == 0, exported.output
    labels = [json.loads(line) for line in exported.stdout.splitlines()]
    assert sorted((e["item_key"], e["label"], e["agree_with_judge"], e["rationale"]) for e in labels) == sorted([
        (results[0]["item_key"], "green", 1, None), (results[1]["item_key"], "amber", 0, "Q2 is 8.08M, not 8.1M")])
    unknown = cli("feedback", "--store", str(store), "--trace-id", "nope", "--up")
    assert unknown.exit_code == 2
    assert unknown.stderr.startswith("unknown trace id 'nope': no stored result in ")
    both = cli("feedback", "--store", str(store), "--trace-id", "x", "--up", "--down")
    assert both.exit_code == 2
    missing = cli("feedback", "--store", str(project.root / "nowhere"), "--trace-id", "x", "--up")
    assert missing.exit_code == 2 and "no such file or folder" in missing.stderr


def test_feedback_that_contradicts_itself_is_refused(judge, scripted_llm, project, cli):
    """Issue 62, finding 3: a thumbs-up whose label is another verdict, a thumbs-down whose
    label is the judged verdict: exit 2 with the reason, and nothing stored."""
    scripted_llm.script(verdict("green"))
    trace = judge(DECK).results[0]["trace_id"]
    for rating, label, reason in (
            ("--up", "red", "a thumbs-up says the verdict green is right, and label 'red' says it is wrong"),
            ("--down", "green", "a thumbs-down says the verdict green is wrong, and label 'green' is that verdict")):
        refused = cli("feedback", "--store", "out", "--trace-id", trace, rating, "--label", label)
        assert refused.exit_code == 2 and reason in refused.stderr, refused.output
    assert not (project.root / "reports" / "reviews.sqlite").exists() or \
        cli("labels", "export", "reports", "--pipeline", "slide_judge").stdout == ""


@pytest.mark.xdist_group("litellm")      # litellm imported by one worker only
def test_example_reads_its_csv(project, fake_llm):
    """The shipped example end to end through HTTP (Ollama's protocol, through litellm)."""
    copy_example(EXAMPLE, project.root / "example")
    fake_llm.script(verdict("green"))
    base = fake_llm.url.rsplit("/v1", 1)[0]
    os.chdir(project.root / "example")
    outcome = run(PIPELINE, Path("input.json"), out=project.root / "ex", cache_dir=project.root / "c",
                  overrides=[f"models.judge.api_base={base}"])
    assert len(outcome.results) == 5
    assert "West | 3254567 | 3810000" in fake_llm.requests[0].prompt


def test_a_slide_checked_against_a_csv_is_judged_again_when_the_csv_changes(judge, scripted_llm, project):
    """(review) source_data naming a CSV file: its key holds the name, the memo its contents."""
    (project.root / "data").mkdir(exist_ok=True)
    table = project.root / "data" / "kpis.csv"
    table.write_text("q,revenue\nQ1,7234567\n")
    deck = {**DECK, "source_data": [{"file": "kpis.csv"}], "slides": DECK["slides"][:1]}
    scripted_llm.script(verdict("green"))
    judge(deck, f"params.data_root={project.root / 'data'}")
    scripted_llm.requests.clear()
    assert judge(deck, f"params.data_root={project.root / 'data'}").results[0].get("memo_hit") is True
    assert scripted_llm.requests == []
    table.write_text("q,revenue\nQ1,6500000\n")
    again = judge(deck, f"params.data_root={project.root / 'data'}").results[0]
    assert not again.get("memo_hit") and len(scripted_llm.requests) == 1
