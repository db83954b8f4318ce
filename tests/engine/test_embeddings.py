"""Embeddings through the model layer: `text_similarity` with `metric: cosine` asks its
`model:` for the vectors of both texts (one request, cached, recorded in calls.jsonl,
counted), against the scripted model and, over HTTP, the fake server's /v1/embeddings."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from helpers import one_step_pipeline, run, write_json

VECTORS = {"a cat": [1.0, 2.0, 3.0], "a kitten": [1.5, 2.0, 2.5], "a rocket": [-3.0, 0.5, -1.0]}
ROWS = [{"t": "a cat", "r": "a kitten"}, {"t": "a cat", "r": "a rocket"}]
STEP = ("{id: sim, uses: text_similarity, with: {input: '{{ item.t }}', reference: '{{ item.r }}', "
        "metric: cosine, model: m, threshold: 0.5}}")
OUTPUT = '{score: "{{ steps.sim.score }}", passed: "{{ steps.sim.passed }}"}'
SECRET = "sk-embeddings-secret-0123456789"
# scikit-learn (seconds to import) is imported by the tests that compare with it, on one worker
pytestmark = pytest.mark.xdist_group("sklearn")


def expected(text: str, reference: str) -> float:
    from sklearn.metrics.pairwise import cosine_similarity
    return float(cosine_similarity(np.array([VECTORS[text]]), np.array([VECTORS[reference]]))[0, 0])


def _calls(project: Any, out: str = "out") -> list[dict[str, Any]]:
    return [json.loads(line) for line in (project.root / out / "calls.jsonl").read_text().splitlines()]


def test_cosine_embeds_both_texts_in_one_call_and_scores_their_cosine(project, scripted_llm):
    scripted_llm.answer_embeddings(VECTORS)
    path = one_step_pipeline(project, STEP, model=f"{{model: scripted/emb, api_key: {SECRET}}}", output=OUTPUT)
    outcome = run(path, write_json(project.root / "in.json", ROWS))
    results = project.results()
    for row, result in zip(ROWS, results, strict=True):
        assert abs(result["score"] - expected(row["t"], row["r"])) < 1e-6
    assert [r["passed"] for r in results] == [True, False]
    assert sorted(r.body["input"] for r in scripted_llm.requests) == [[r["t"], r["r"]] for r in ROWS]
    assert all(r.path.endswith("/embeddings") and "messages" not in r.body for r in scripted_llm.requests)
    calls = _calls(project)
    assert len(calls) == 2 and not any(c["cached"] or c["error"] for c in calls)
    assert [m["content"] for m in calls[0]["messages"]] in ([r["t"], r["r"]] for r in ROWS)
    assert calls[0]["answer"] == "2 embedding(s) of 3 dimensions"
    assert outcome.summary["models"]["m"]["calls"] == 2 and outcome.summary["models"]["m"]["answered"] == 2
    # The key is sent to the model (its transport) and nowhere else: not the run folder, not the cache.
    for folder in (project.root / "out", project.root / "cache"):
        for file in folder.rglob("*"):
            assert not file.is_file() or SECRET.encode() not in file.read_bytes(), file


def test_a_rerun_sends_nothing_and_scores_from_the_cache(project, scripted_llm):
    scripted_llm.answer_embeddings(VECTORS)
    path = one_step_pipeline(project, STEP, model="{model: scripted/emb}", output=OUTPUT)
    run(path, write_json(project.root / "in.json", ROWS))
    first = project.results()
    scripted_llm.reset()              # no rule now: a request sent would fail
    run(path, project.root / "in.json", out="again")
    assert scripted_llm.requests == []
    assert project.results("again") == first
    assert all(call["cached"] for call in _calls(project, "again"))


def test_a_chat_answer_in_the_cache_is_not_taken_for_embeddings(project, scripted_llm):
    """The same texts asked as a chat and as embeddings are two keys: neither answers the other."""
    scripted_llm.answer_embeddings(VECTORS)
    project.pipeline("""
        version: 1
        name: both
        models: {m: {model: scripted/emb}}
        steps:
          - {id: ask, uses: llm, with: {model: m, messages: [{role: user, content: a cat}, {role: user, content: a kitten}]}}
          - {id: sim, uses: text_similarity, with: {input: a cat, reference: a kitten, metric: cosine, model: m}}
        output: {score: "{{ steps.sim.score }}"}
        """, "both.yaml")
    run(project.root / "pipelines/both.yaml", write_json(project.root / "in.json", [{}]))
    assert abs(project.results()[0]["score"] - expected("a cat", "a kitten")) < 1e-6
    assert len(scripted_llm.requests) == 2


def test_validate_refuses_cosine_without_a_model_and_a_model_for_another_metric(project, cli):
    project.pipeline("""
        version: 1
        name: bad
        models: {m: {model: scripted/emb}}
        steps:
          - {id: a, uses: text_similarity, with: {input: x, reference: y, metric: cosine}}
          - {id: b, uses: text_similarity, with: {input: x, reference: y, metric: bleu, model: m}}
          - {id: c, uses: text_similarity, with: {input: x, reference: y, metric: cosine, model: nope}}
        output: {a: "{{ steps.a.score }}"}
        """, "bad.yaml")
    result = cli("validate", "pipelines/bad.yaml")
    assert result.exit_code == 2
    assert "bad.yaml:5:" in result.output and "add `model:`" in result.output
    assert "bad.yaml:6:" in result.output and "remove `model:`" in result.output
    assert "bad.yaml:7:" in result.output and "nope" in result.output


def test_render_shows_the_embeddings_call_and_sends_nothing(project, scripted_llm, cli):
    scripted_llm.answer_embeddings(VECTORS)
    path = one_step_pipeline(project, STEP, model="{model: scripted/emb}", output=OUTPUT)
    source = write_json(project.root / "in.json", ROWS[:1])
    result = cli("render", str(path), "--input", str(source))
    assert "--- embeddings call: model m (scripted/emb) [not cached] ---" in result.output
    assert "a kitten" in result.output and scripted_llm.requests == []
    assert "est. completion tokens 0 (0 per uncached call: embeddings have none)" in result.output
    run(path, source)
    result = cli("render", str(path), "--input", str(source))
    assert "--- embeddings call: model m (scripted/emb) [cached] ---" in result.output
    assert len(scripted_llm.requests) == 1


def test_a_failed_embeddings_request_fails_the_item_with_the_servers_message(project, scripted_llm):
    scripted_llm.answer_embeddings({"a cat": [1.0, 0.0]})          # no vector for the reference: a 400
    path = one_step_pipeline(project, STEP, model="{model: scripted/emb}", output=OUTPUT)
    run(path, write_json(project.root / "in.json", ROWS[:1]))
    [result] = project.results()
    assert "no vector for 'a kitten'" in json.dumps(result)


def test_the_http_transport_posts_to_the_servers_embeddings_endpoint(project, fake_llm):
    fake_llm.answer_embeddings(VECTORS)
    path = one_step_pipeline(project, STEP, model=f"{{model: openai/emb, api_base: '{fake_llm.url}'}}",
                             output=OUTPUT)
    run(path, write_json(project.root / "in.json", ROWS))
    assert [r["score"] for r in project.results()] == [round(expected(r["t"], r["r"]), 6) for r in ROWS]
    assert sorted(r.path for r in fake_llm.requests) == ["/v1/embeddings"] * 2
    assert all(r.body["model"] == "emb" and "messages" not in r.body for r in fake_llm.requests)


@pytest.mark.slow       # imports litellm
def test_litellm_embeds_for_a_model_routed_through_it(project, fake_llm):
    fake_llm.answer_embeddings(VECTORS)
    path = one_step_pipeline(project, STEP, output=OUTPUT, model=f"{{model: openai/emb, api_base: '{fake_llm.url}', "
                                                                  f"api_key: {SECRET}, transport: litellm}}")
    run(path, write_json(project.root / "in.json", ROWS))
    assert [r["score"] for r in project.results()] == [round(expected(r["t"], r["r"]), 6) for r in ROWS]
    assert sorted(r.path for r in fake_llm.requests) == ["/v1/embeddings"] * 2
    assert all(r.headers["authorization"] == f"Bearer {SECRET}" for r in fake_llm.requests)
    assert SECRET not in (project.root / "out" / "calls.jsonl").read_text()


@pytest.mark.parametrize("vectors", [[[float("nan"), 1.0], [0.0, -1.0]], [[float("inf"), 1.0], [-1.0, 0.0]]])
def test_a_vector_that_is_not_finite_is_no_match(vectors):
    """(review) NaN or infinity in an embedding was clamped into a cosine of 1.0, a perfect match."""
    from runner.llm.client.transport import TransportError, vector_list
    from runner.text.similarity import cosine
    with pytest.raises(ValueError, match="not finite"):
        cosine(*vectors)
    with pytest.raises(TransportError, match="finite numbers"):
        vector_list([{"index": i, "embedding": v} for i, v in enumerate(vectors)], 2)
