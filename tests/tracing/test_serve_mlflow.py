"""`runner serve --trace mlflow` against a real MLflow server: each judgment is a trace whose
id the answer gives, and a reader's feedback is a HUMAN assessment on it (beside the review
`runner labels export` reads). Needs `pip install -e '.[mlflow,mlflow-server]'`; CI's mlflow
stage runs it with RUNNER_REQUIRE_MLFLOW."""

from __future__ import annotations

import json

from runner.serve.app import create_app
from runner.serve.judging import Settings
from test_mlflow_tracing import mlflow_server, needs_server, verdict  # noqa: F401 - the session's MLflow server
from test_slide_deck import SLIDES, slide_deck, slide_project


@needs_server
def test_feedback_through_the_api_is_an_assessment_on_the_trace(project, fake_llm, mlflow_server, monkeypatch,  # noqa: F811
                                                                cli):
    from fastapi.testclient import TestClient
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.url)
    monkeypatch.setenv("JUDGE_BASE_URL", fake_llm.url.rsplit("/v1", 1)[0])
    fake_llm.script(verdict("red", 25, "growth is 11.7%, not 50%"), contains="Growth of 11.7%")
    fake_llm.script(verdict("green", 92, "numbers match"))
    app = create_app(Settings(root=project.root, cache_dir=project.root / "cache", trace="mlflow"),
                     slide_project(project.root), str(project.root / "results.sqlite"))
    with TestClient(app) as client:
        judged = client.post("/v1/pipelines/slide_judge/judge", json={"item": slide_deck(SLIDES)}).json()
        red = judged["results"][2]
        assert red["result"]["rating"] == "red" and red["trace_id"] == red["result"]["mlflow_trace_id"]
        assert all(r["trace_id"] for r in judged["results"])
        given = client.post(f"/v1/results/{red['item_key']}/feedback", params={"pipeline": "slide_judge"},
                            json={"rating": "down", "label": "amber", "user": "ana",
                                  "rationale": "11.7% is right; the slide rounds it"}).json()
    assert given["mlflow"]["logged"] is True and given["mlflow"]["trace_id"] == red["trace_id"]
    trace = mlflow_server.client().get_trace(red["trace_id"])
    (human,) = [a for a in trace.info.assessments if a.source.source_type == "HUMAN"]
    assert (human.name, human.value, human.rationale, human.source.source_id) == (
        "human_feedback", False, "11.7% is right; the slide rounds it", "ana")
    assert human.assessment_id == given["mlflow"]["assessment_id"]
    assert {a.name for a in trace.info.assessments if a.source.source_type == "LLM_JUDGE"} == {"rating", "score"}
    exported = cli("labels", "export", str(project.root / "reports"), "--pipeline", "slide_judge")
    (label,) = [json.loads(line) for line in exported.stdout.splitlines()]
    assert (label["item_key"], label["label"]) == (red["item_key"], "amber")
