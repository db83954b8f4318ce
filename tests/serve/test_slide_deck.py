"""The numeric slide judge through the API, end to end (issue 53's done-when): five slides
judged, one changed and the deck judged again as a job (four from the store, one judged), a
thumbs down with a rationale, seen by `runner labels export` and by `runner view`."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from runner.serve.app import create_app
from runner.serve.judging import Settings

# Every test here judges through the slide judge's litellm seat: litellm (5-8 s to import) by one worker only.
pytestmark = pytest.mark.xdist_group("litellm")

REPO = Path(__file__).resolve().parents[2]
SLIDES = ["<h1>Q2 review</h1><p>Revenue $8.1M</p>", "<h2>Revenue</h2><p>Q1 $7.2M, Q2 $8.1M</p>",
          "<h2>Growth</h2><p>Growth of 11.7%</p>", "<h2>Customers</h2><p>1,250 to 1,400</p>",
          "<h2>Regions</h2><p>West led with $3.9M</p>"]


def slide_deck(slides: list[str]) -> dict[str, Any]:
    return {"session_id": "s1",
            "source_data": [{"query": "SELECT q, revenue FROM kpis", "columns": ["q", "revenue"],
                             "rows": [["Q1", 7234567], ["Q2", 8080000]]}],
            "slides": [{"slide_index": n, "html": html} for n, html in enumerate(slides)]}


def verdict(rating: str, score: int, explanation: str) -> str:
    return json.dumps({"rating": rating, "score": score, "explanation": explanation, "issues": []})


def slide_project(root: Path) -> Path:
    """The repository's slide judge in a project of its own."""
    for folder, name in (("pipelines", "slide_judge.yaml"), ("prompts", "slide_judge.j2"),
                         ("schemas", "slide_verdict.schema.json")):
        (root / folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / folder / name, root / folder / name)
    return root / "pipelines"


def wait(client: Any, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while (job := client.get(f"/v1/jobs/{job_id}").json())["status"] not in ("succeeded", "failed", "cancelled"):
        assert time.monotonic() < deadline, job
        time.sleep(0.05)
    return job


@pytest.fixture
def slide_server(project, fake_llm, monkeypatch, db_url):
    from fastapi.testclient import TestClient
    monkeypatch.setenv("JUDGE_BASE_URL", fake_llm.url.rsplit("/v1", 1)[0])
    fake_llm.script(verdict("red", 20, "growth is 11.7%, the slide says 50%"), contains="Growth of 50%")
    fake_llm.script(verdict("green", 92, "numbers match"))
    app = create_app(Settings(root=project.root, cache_dir=project.root / "cache"), slide_project(project.root), db_url)
    with TestClient(app) as client:
        yield client


def test_the_slide_judge_through_the_api(slide_server, fake_llm, project, cli, db_url):
    first = slide_server.post("/v1/pipelines/slide_judge/judge", json={"item": slide_deck(SLIDES)}).json()
    assert first["counts"] == {"judged": 5, "errors": 0, "store": 0, "cache": 0} and len(fake_llm.requests) == 5
    assert {r["result"]["rating"] for r in first["results"]} == {"green"}
    changed = [*SLIDES[:2], "<h2>Growth</h2><p>Growth of 50%</p>", *SLIDES[3:]]
    job = slide_server.post("/v1/pipelines/slide_judge/jobs", json={"items": [slide_deck(changed)]}).json()
    done = wait(slide_server, job["id"])
    assert done["status"] == "succeeded" and done["counts"]["store"] == 4 and done["counts"]["judged"] == 1
    assert len(fake_llm.requests) == 6
    results = [json.loads(line) for line in slide_server.get(f"/v1/jobs/{job['id']}/results").text.splitlines()]
    red = results[2]
    assert red["rating"] == "red" and red["slide_index"] == 2
    assert [r["item_key"] for r in results[:2]] == [r["item_key"] for r in first["results"][:2]]

    stored = slide_server.get(f"/v1/results/{red['item_key']}", params={"pipeline": "slide_judge"}).json()
    assert stored["result"]["rating"] == "red" and stored["result"]["content_hash"] == red["content_hash"]
    given = slide_server.post(f"/v1/results/{red['item_key']}/feedback", params={"pipeline": "slide_judge"},
                              json={"rating": "down", "label": "green", "user": "ana",
                                    "rationale": "50% is the two-year growth, which the data also shows"})
    assert given.status_code == 200, given.text
    assert given.json()["saved"] is True and given.json()["mlflow"] == {"logged": False, "trace_id": None}
    assert given.json()["review"]["judged"] == "red" and given.json()["review"]["agrees"] is False

    # Issue 61: the feedback is in the results' database: PostgreSQL's, or reports/reviews.sqlite.
    postgres = db_url.startswith("postgresql://")
    assert (project.root / "reports" / "reviews.sqlite").exists() is not postgres
    exported = cli("labels", "export", str(project.root / "reports"), "--pipeline", "slide_judge",
                   *(["--db", db_url] if postgres else []))
    assert exported.exit_code == 0, exported.output
    (label,) = [json.loads(line) for line in exported.stdout.splitlines()]
    assert label["item_key"] == red["item_key"] and label["label"] == "green" and label["judged"] == "red"
    assert label["rationale"] == "50% is the two-year growth, which the data also shows"

    from starlette.testclient import TestClient

    from runner.view.app import create_app as view_app
    view = TestClient(view_app(project.root / "reports"), base_url="http://127.0.0.1")
    page = view.get(f"/run/{done['run'].removeprefix('reports/')}/item/3")
    assert page.status_code == 200
    assert ("two-year growth" in page.text and "ana" in page.text) is not postgres   # the view reads SQLite


def test_feedback_is_checked(slide_server):
    judged = slide_server.post("/v1/pipelines/slide_judge/judge", json={"item": slide_deck(SLIDES[:1])}).json()
    key = judged["results"][0]["item_key"]
    url = f"/v1/results/{key}/feedback"
    for params, body, status, message in (
            ({"pipeline": "slide_judge"}, {"rating": "meh", "user": "ana"}, 400, "rating"),
            ({"pipeline": "slide_judge"}, {"rating": "up"}, 400, "user"),
            ({"pipeline": "slide_judge"}, {"rating": "up", "user": ""}, 400, "user"),
            ({}, {"rating": "up", "user": "ana"}, 400, "pipeline"),
            ({"pipeline": "slide_judge"}, {"rating": "up", "user": "ana", "extra": 1}, 400, "extra"),
            ({"pipeline": "nope"}, {"rating": "up", "user": "ana"}, 404, "unknown pipeline")):
        refused = slide_server.post(url, params=params, json=body)
        assert refused.status_code == status and message in refused.json()["error"], refused.text
    unknown = slide_server.post("/v1/results/0000000000000000/feedback", params={"pipeline": "slide_judge"},
                                json={"rating": "up", "user": "ana"})
    assert unknown.status_code == 404
    for body, reason in (({"rating": "up", "label": "red", "user": "ana"}, "a thumbs-up says the verdict green is "
                                                                           "right, and label 'red' says it is wrong"),
                         ({"rating": "down", "label": "green", "user": "ana"}, "a thumbs-down says the verdict "
                                                                               "green is wrong")):
        refused = slide_server.post(url, params={"pipeline": "slide_judge"}, json=body)     # issue 62, finding 3
        assert refused.status_code == 400 and reason in refused.json()["error"], refused.text
    again = [slide_server.post(url, params={"pipeline": "slide_judge"}, json={"rating": r, "user": "bo"}).json()
             for r in ("up", "down")]
    assert [a["review"]["agrees"] for a in again] == [True, False]       # a second review replaces the first
