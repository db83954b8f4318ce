"""POST /v1/pipelines/{name}/judge, GET /v1/results/{item_key}, and the results store behind
them, on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import json

import httpx

from helpers import scripted_model, server_error
from runner.pipeline.loader import load_pipeline
from runner.runs.reads import load_items, reads_exploded_list
from runner.runs.request import ItemSource
from runner.serve.app import create_app
from runner.serve.judging import Settings
from serve_fixtures import DECK_JUDGE, deck


def sources(response):
    assert response.status_code == 200, response.text
    return [r["source"] for r in response.json()["results"]]


def test_a_deck_is_judged_then_answered_from_the_store(served):
    first = served.judge(deck("<p>A</p>", "<p>B</p>"))
    assert sources(first) == ["judged", "judged"]
    body = first.json()
    assert [r["result"]["rating"] for r in body["results"]] == ["green", "green"]
    assert [r["index"] for r in body["results"]] == [1, 2] and body["pipeline"] == "deck"
    assert all(r["pipeline_hash"] == body["pipeline_hash"] and r["trace_id"] is None for r in body["results"])
    again = served.judge(deck("<p>A</p>", "<p>B!</p>"))
    assert sources(again) == ["store", "judged"]
    assert again.json()["results"][0]["item_key"] == body["results"][0]["item_key"]
    assert again.json()["results"][0]["result"] == body["results"][0]["result"]
    assert len(served.model.requests) == 3 and again.json()["counts"] == {"store": 1, "judged": 1,
                                                                             "errors": 0, "cache": 0}


def test_one_item_alone(served):
    answer = served.client.post("/v1/pipelines/deck/judge", json={"item": deck("<p>A</p>")})
    assert sources(answer) == ["judged"]


def test_params_make_another_result_and_are_checked(served):
    base = served.judge(deck("<p>A</p>")).json()
    stricter = served.judge(deck("<p>A</p>"), params={"green_at": 95}).json()
    assert stricter["pipeline_hash"] != base["pipeline_hash"] and stricter["results"][0]["source"] == "judged"
    assert "Green at 95" in served.model.requests[-1].prompt
    assert sources(served.judge(deck("<p>A</p>"), params={"green_at": 95})) == ["store"]
    assert sources(served.judge(deck("<p>A</p>"), params={"green_at": 80})) == ["store"]    # the default, given
    # a param no prompt reads: another result, answered from the LLM cache
    assert sources(served.judge(deck("<p>A</p>"), params={"data_root": "elsewhere"})) == ["cache"]
    assert len(served.model.requests) == 2
    (served.root / "outlink").symlink_to("/etc")           # a link in the project, to a folder outside it
    for params, message in (({"green_at": 150}, "params.green_at: 150 is greater than the maximum of 100"),
                            ({"models": {}}, "params.models: a request may set only the params the pipeline "
                                             "declares under params: (green_at, data_root)"),
                            ({"data_root": "../../etc"}, "params.data_root: '../../etc' leaves the project"),
                            ({"data_root": "/etc"}, "params.data_root: '/etc' leaves the project"),
                            ({"data_root": "outlink/x"}, "params.data_root: 'outlink/x' leaves the project "
                                                         "(an absolute path, ~, .. or a symbolic link out of it)")):
        refused = served.judge(deck("<p>A</p>"), params=params)
        assert refused.status_code == 400 and message in refused.json()["error"], refused.text
    nan = served.client.post("/v1/pipelines/deck/judge", content='{"item": {"slides": []}, "params": {"green_at": NaN}}',
                             headers={"content-type": "application/json"})
    assert nan.status_code == 400 and "NaN" in nan.json()["error"]
    lone = served.client.post("/v1/pipelines/deck/judge", headers={"content-type": "application/json"},
                              content='{"item": ' + json.dumps(deck("<p>A</p>")) + ', "params": {"data_root": "\\ud800"}}')
    assert lone.status_code == 200 and lone.json()["counts"]["errors"] == 0, lone.text     # read as U+FFFD, not a 500


def test_a_params_object_keys_are_checked_as_paths_and_its_json_type_as_declared(served_project, served):
    """`{"/etc": "passwd"}` read /etc/passwd into the answer (only values were checked), and a
    string param took an object or a number as its YAML text."""
    (served_project.root / "data").mkdir()
    (served_project.root / "data" / "a.txt").write_text("line one\nline two\n")
    served_project.pipeline("""
        version: 1
        name: keys
        params:
          sources: {default: {data: a.txt}, type: object}
          note: {default: x, type: string}
        steps:
          - id: quotes
            uses: foreach
            with:
              items: "{{ params.sources | dictsort }}"
              as: pair
              steps: [{id: src, uses: read_lines, with: {root: "{{ pair[0] }}", file: "{{ pair[1] }}", start: 1, end: 1}}]
              output: "{{ steps.src.cited_text }}"
        output: {quotes: "{{ steps.quotes }}", note: "{{ params.note }}"}
        """, "keys.yaml")
    first = served.judge({"q": 1}, name="keys").json()
    assert first["results"][0]["result"]["quotes"] == ["line one"], first
    for params, message in (({"sources": {"/etc": "passwd"}}, "params.sources: '/etc' leaves the project"),
                            ({"sources": {"../../etc": "passwd"}}, "params.sources: '../../etc' leaves the project"),
                            ({"note": {"a": 1}}, "params.note: a object where the param is declared string"),
                            ({"note": 5}, "params.note: a number where the param is declared string")):
        refused = served.judge({"q": 1}, params=params, name="keys")
        assert refused.status_code == 400 and message in refused.json()["error"], refused.text
    assert served.judge({"q": 1}, params={"note": "5"}, name="keys").json()["results"][0]["result"]["note"] == "5"
    (served_project.root / "A: yes").mkdir()         # (review) a name with a colon second is no drive
    assert served.judge({"q": 1}, params={"sources": {"A: yes": "x.txt"}}, name="keys").status_code == 200


def test_a_param_that_would_change_the_models_is_refused(served_project, served):
    served_project.pipeline("""
        version: 1
        name: pick
        params: {model_name: openai/scripted}
        models: {judge: {model: "{{ params.model_name }}"}}
        steps: [{id: a, uses: llm, with: {model: judge, prompt: "hi {{ item.x }}", json: true}}]
        output: {v: "{{ steps.a.output }}"}
        """, "pick.yaml")
    refused = served.client.post("/v1/pipelines/pick/judge", json={"item": {"x": 1},
                                                                   "params": {"model_name": "openai/gpt-4o"}})
    assert refused.status_code == 400 and "change the pipeline's models" in refused.json()["error"]


def test_stored_results_are_read_by_key(served):
    judged = served.judge(deck("<p>A</p>")).json()
    key, digest = judged["results"][0]["item_key"], judged["pipeline_hash"]
    stored = served.client.get(f"/v1/results/{key}", params={"pipeline": "deck"})
    assert stored.status_code == 200 and stored.json()["result"] == judged["results"][0]["result"]
    assert stored.json()["pipeline_hash"] == digest and stored.json()["item_key"] == key
    assert list(stored.json()) == ["pipeline", "pipeline_hash", "item_key", "stored_at", "trace_id", "result"]
    assert served.client.get(f"/v1/results/{key}", params={"pipeline": "deck", "pipeline_hash": digest}).status_code == 200
    missing = served.client.get("/v1/results/0123456789abcdef", params={"pipeline": "deck"})
    assert missing.status_code == 404 and "no stored result of deck" in missing.json()["error"]
    assert served.client.get(f"/v1/results/{key}").status_code == 400        # which pipeline?
    assert served.client.get(f"/v1/results/{key}", params={"pipeline": "dekc"}).json()["error"] == \
        "unknown pipeline 'dekc'. Did you mean 'deck'?"


def test_a_changed_pipeline_judges_again_and_the_cache_answers(served_project, served):
    first = served.judge(deck("<p>A</p>")).json()
    path = served_project.root / "pipelines" / "deck.yaml"
    path.write_text(path.read_text().replace('  score: "{{ steps.ask.output.score }}"',
                                              '  score: "{{ steps.ask.output.score * 1 }}"'))   # the same prompt
    again = served.judge(deck("<p>A</p>")).json()
    assert again["pipeline_hash"] != first["pipeline_hash"] and again["results"][0]["source"] == "cache"
    path.write_text(path.read_text().replace("Rate each slide", "Rate every slide"))      # no result depends on it
    assert served.judge(deck("<p>A</p>")).json()["pipeline_hash"] == again["pipeline_hash"]
    assert len(served.model.requests) == 1


def test_a_failed_judgment_is_answered_but_never_stored(served):
    served.model.script(server_error("model overloaded"), repeat_last=False)     # one failed answer, then answers
    answer = served.judge(deck("<p>A</p>")).json()
    failed = answer["results"][0]
    assert failed["source"] == "error" and "model overloaded" in failed["result"]["error"]
    assert answer["counts"] == {"judged": 0, "errors": 1, "store": 0, "cache": 0}
    assert sources(served.judge(deck("<p>A</p>"))) == ["judged"]
    assert sources(served.judge(deck("<p>A</p>"))) == ["store"]


def test_an_item_the_input_cannot_make_is_an_error_of_its_own(served):
    answer = served.client.post("/v1/pipelines/deck/judge", json={"items": [{"slides": "no list"}, deck("<p>A</p>")]})
    first, second = answer.json()["results"]
    assert "field 'slides' is missing or not a list" in first["result"]["error"] and second["source"] == "judged"
    assert first["source"] == "error" and answer.json()["counts"] == {"judged": 1, "errors": 1, "store": 0, "cache": 0}


def test_the_request_is_checked_before_anything_is_judged(served):
    post = served.client.post
    cases = [
        (post("/v1/pipelines/deck/judge", json={"items": [deck("a")], "item": deck("b")}), 400, "give either `item`"),
        (post("/v1/pipelines/deck/judge", json={}), 400, "give either `item`"),
        (post("/v1/pipelines/deck/judge", json={"items": [], "extra": 1}), 400, "extra"),
        (post("/v1/pipelines/deck/judge", content="{not json", headers={"content-type": "application/json"}), 400, ""),
        (post("/v1/pipelines/nothing/judge", json={"items": []}), 404, "unknown pipeline 'nothing'"),
        (post("/v1/pipelines/deck/judge", json={"items": [deck(*["<p>x</p>"] * 101)]}), 413, "at most 100"),
        (post("/v1/pipelines/deck/judge", json={"items": [deck("x" * (9 * 2**20))]}), 413, "larger than"),
        (served.client.get("/v1/nowhere"), 404, "Not Found"),
        (served.client.put("/v1/pipelines"), 405, "Method Not Allowed"),
    ]
    for response, status, message in cases:
        assert response.status_code == status, response.text
        assert message in response.json()["error"]
        assert "Traceback" not in response.text
    assert served.model.requests == []


def test_identical_requests_in_flight_make_one_set_of_calls(served_project, db_url):
    """Two requests for the same content at once: one call, both answered (one of them
    joined the other's computation); a third for other content makes its own call."""
    model = scripted_model(json.dumps({"rating": "amber", "score": 60}))
    app = create_app(Settings(root=served_project.root, cache_dir=served_project.root / "cache", transport=model),
                     served_project.root / "pipelines", db_url)

    async def scenario() -> list[dict]:
        async with app.router.lifespan_context(app), httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
            model.hold()
            asked = [asyncio.ensure_future(client.post("/v1/pipelines/deck/judge", json={"item": deck(html)}))
                     for html in ("<p>same</p>", "<p>same</p>", "<p>other</p>")]
            while model.in_flight < 2:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            model.release()
            return [(await a).json() for a in asked]

    answers = asyncio.run(scenario())
    assert len(model.calls(contains="same")) == 1 and len(model.calls(contains="other")) == 1
    assert [a["results"][0]["result"]["rating"] for a in answers] == ["amber"] * 3
    assert answers[0]["results"][0]["item_key"] == answers[1]["results"][0]["item_key"]


def test_the_pipelines_and_what_a_request_may_set(served_project, served):
    (served_project.root / "pipelines" / "broken.yaml").write_text("version: 1\nname: broken\nsteps: nope\n")
    listed = served.client.get("/v1/pipelines").json()
    (described,) = listed["pipelines"]
    assert described["name"] == "deck" and described["description"] == "Rate each slide of a deck against its data."
    assert described["params"] == {"green_at": 80, "data_root": "data"}
    assert described["params_schema"]["green_at"] == {"type": "number", "minimum": 0, "maximum": 100}
    assert described["input"] == {"adapter": "json", "explode": "slides", "record_fields": ["data", "slides"],
                                  "item_fields": ["html"]}
    assert len(described["pipeline_hash"]) == 16 and described["stored"] == 0
    assert "broken.yaml" in listed["unavailable"] and "steps" in listed["unavailable"]["broken.yaml"]


def test_an_exploded_items_key_keeps_the_list_when_the_pipeline_reads_it(served_project, served):
    """A slide judged with the whole deck in its prompt came back from the store after another
    slide was added (its key left the list out), where `runner run` judged it anew."""
    served_project.pipeline(DECK_JUDGE.replace("name: deck", "name: whole").replace(
        "Data: {{ deck.data }}.", "Deck: {{ deck.slides | map(attribute='html') | join(' / ') }}."), "whole.yaml")
    first = served.judge(deck("<p>A</p>"), name="whole").json()["results"][0]
    again = served.judge(deck("<p>A</p>", "<p>B</p>"), name="whole").json()["results"]
    assert [r["source"] for r in again] == ["judged", "judged"] and again[0]["item_key"] != first["item_key"]
    # a pipeline that reads only its own slide keeps each slide's key whatever the deck holds
    plain = [served.judge(deck(*slides)).json()["results"][0]["item_key"] for slides in (["<p>A</p>"],
                                                                                          ["<p>A</p>", "<p>B</p>"])]
    assert plain[0] == plain[1]
    (served_project.root / "deck.json").write_text(json.dumps(deck("<p>A</p>", "<p>B</p>")))
    items = load_items(load_pipeline(served_project.root / "pipelines" / "whole.yaml"),
                       ItemSource(input_path=served_project.root / "deck.json"))
    assert [item.key for item in items] == [r["item_key"] for r in again]      # as `runner run` keys them
    based = DECK_JUDGE.replace("name: deck", "name: based").replace("output:\n", 'output_base: "{{ deck }}"\noutput:\n')
    served_project.pipeline(based, "based.yaml")                   # (review) a result carrying the deck reads it too
    assert reads_exploded_list(load_pipeline(served_project.root / "pipelines" / "based.yaml"))


def test_health_and_the_api_description(served):
    assert served.client.get("/healthz").json() == {"status": "ok", "store": "ok", "pipelines": 1, "jobs": {}}
    for path in ("/healthz", "/v1/pipelines"):        # HEAD answers wherever GET does (a monitor's check was a 405)
        head, get = served.client.head(path), served.client.get(path)
        assert head.status_code == 200 and head.content == b"" and head.headers["content-type"] == \
            get.headers["content-type"]
    spec = served.client.get("/openapi.json").json()
    assert {"/v1/pipelines", "/v1/pipelines/{name}/judge", "/v1/pipelines/{name}/jobs", "/v1/jobs/{job_id}",
            "/v1/jobs/{job_id}/results", "/v1/results/{item_key}", "/v1/results/{item_key}/feedback",
            "/healthz"} <= set(spec["paths"])
    assert set(spec["paths"]["/v1/jobs/{job_id}"]) == {"get", "delete"}
    assert served.client.get("/docs").status_code == 200


def test_an_unreachable_database_is_503_with_a_message(served_project):
    from serve_fixtures import make_client
    model = scripted_model()
    with make_client(served_project.root, model, "postgresql://judge:s3cret-password-x@127.0.0.1:1/results") as client:
        health = client.get("/healthz")
        assert health.status_code == 503 and health.json()["status"] == "degraded"
        answer = client.post("/v1/pipelines/deck/judge", json={"item": deck("<p>A</p>")})
        assert answer.status_code == 503 and "cannot be reached" in answer.json()["error"]
        assert "s3cret-password-x" not in answer.text + health.text
        assert client.get("/v1/pipelines").status_code == 200


def test_only_loopback_host_names_are_answered_on_loopback(served_project):
    from runner.serve.app import Limits
    from serve_fixtures import make_client
    with make_client(served_project.root, scripted_model(), str(served_project.root / "r.sqlite"),
                     Limits(allowed_hosts=["127.0.0.1", "localhost", "testserver"])) as client:
        assert client.get("/healthz").status_code == 200
        rebound = client.get("/healthz", headers={"host": "evil.example:8000"})
        assert rebound.status_code == 400 and "Host header" in rebound.json()["error"]


def test_a_token_guards_every_route_but_health_and_docs(served_project):
    from runner.serve.app import Limits
    from serve_fixtures import make_client
    token = "t" * 32
    with make_client(served_project.root, scripted_model(), str(served_project.root / "r.sqlite"),
                     Limits(token=token)) as client:
        assert client.get("/healthz").status_code == 200 and client.get("/openapi.json").status_code == 200
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": f"Basic {token}"}):
            refused = client.get("/v1/pipelines", headers=headers)
            assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
            assert "Authorization: Bearer" in refused.json()["error"]
        assert client.get("/v1/pipelines", headers={"authorization": f"Bearer {token}"}).status_code == 200


def test_keys_and_url_credentials_never_reach_a_response(served_project, served, monkeypatch):
    served_project.pipeline("""
        version: 1
        name: keyed
        env: [SECRET_JUDGE_KEY, SECRET_JUDGE_URL]
        models: {judge: {model: openai/m, api_base: "{{ env.SECRET_JUDGE_URL }}", api_key: "{{ env.SECRET_JUDGE_KEY }}",
                         retries: 0}}
        steps: [{id: a, uses: llm, with: {model: judge, prompt: "key {{ env.SECRET_JUDGE_KEY }}", json: true}}]
        output: {v: "{{ steps.a.output }}"}
        """, "keyed.yaml")
    monkeypatch.setenv("SECRET_JUDGE_KEY", "sk-very-secret-key-0123456789")
    monkeypatch.setenv("SECRET_JUDGE_URL", "http://user:pa55word-in-url@127.0.0.1:9/v1")
    served.model.script(server_error("rejected sk-very-secret-key-0123456789 at http://user:pa55word-in-url@127.0.0.1:9/v1"))
    answer = served.client.post("/v1/pipelines/keyed/judge", json={"item": {"x": 1}})
    listed = served.client.get("/v1/pipelines")
    assert "keyed" in [p["name"] for p in listed.json()["pipelines"]]
    for text in (answer.text, listed.text):
        assert "sk-very-secret-key-0123456789" not in text and "pa55word-in-url" not in text
    assert answer.status_code == 200 and answer.json()["results"][0]["result"]["error"]




def test_a_pipeline_reading_rows_in_namespaces_says_each_ones_fields(served_project, served):
    (served_project.root / "pipelines" / "evals.yaml").write_text(
        "version: 1\nname: evals\ninput: {adapter: jsonl, namespaces: [item, sample]}\nsteps:\n"
        "  - {id: check, uses: string_check, with: {input: '{{ sample.output_text }}', reference: '{{ item.answer }}',"
        " operation: eq}}\noutput: {passed: '{{ steps.check.passed }}'}\n", encoding="utf-8")
    listed = served.client.get("/v1/pipelines").json()
    [described] = [p for p in listed["pipelines"] if p["name"] == "evals"]
    assert described["input"] == {"adapter": "jsonl", "namespaces": {"item": ["answer"], "sample": ["output_text"]}}
