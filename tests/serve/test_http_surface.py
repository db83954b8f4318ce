"""`runner serve`'s HTTP surface against hostile and careless clients (issue 63 S3, S6, S7,
S11, S12, S13; issue 62 #9): credentials in --db, body limits whatever the Content-Type,
deep JSON, a bad --db, NUL bytes, Host case, OPTIONS, and the OpenAPI document."""

from __future__ import annotations

import gc
import json

import httpx
import pytest

from helpers import scripted_model
from runner.serve.app import Limits
from serve_fixtures import Process, deck, free_port, make_client

PASSWORD = "hunter2secret"
ANSWER = json.dumps({"rating": "green", "score": 90})


def test_issue63_s3_a_query_password_in_db_never_shows(served_project, cli, monkeypatch):
    """S3 (issue 61 "one redaction"): `?password=` in --db is hidden in the start line, in 503
    bodies and in /healthz, which needs no token."""
    url = f"postgresql://judge@127.0.0.1:1/v?password={PASSWORD}&sslpassword=other-secret-9"
    monkeypatch.setattr("uvicorn.Server.run", lambda self: None)        # the start line, then no serving
    started = cli("serve", "pipelines", "--port", str(free_port()), "--db", url)
    assert started.exit_code == 0 and "runner serve: http://127.0.0.1:" in started.stderr, started.output
    assert "password=***" in started.stderr
    assert gc.get_freeze_count() == 0          # the garbage collector's freeze is for a server that serves
    with make_client(served_project.root, scripted_model(ANSWER), url) as client:
        health = client.get("/healthz")
        judged = client.post("/v1/pipelines/deck/judge", json={"item": deck("<p>A</p>")})
    assert health.status_code == 503 and judged.status_code == 503, judged.text
    for text in (started.output, health.text, judged.text):
        assert PASSWORD not in text and "other-secret-9" not in text


def test_issue61_one_redaction_hides_query_credentials_and_keeps_ordinary_words():
    """Issue 61: one list of secret names and one minimum, for URL userinfo and the query
    credentials of libpq and URLs, wherever a message is made."""
    from runner.redact import MIN_SECRET, redact
    text = ("postgresql://judge:pw@db/v?sslpassword=abc&application_name=x host=a password=pw "
            "https://h/v1?api_key=k1&token=t2 max_tokens=512")
    assert redact(text, frozenset()) == ("postgresql://***@db/v?sslpassword=***&application_name=x host=a "
                                         "password=*** https://h/v1?api_key=***&token=*** max_tokens=512")
    assert MIN_SECRET == 8


@pytest.mark.parametrize("password", [PASSWORD, "Zx9#kq,Lm;T7"], ids=["quoted", "bare with punctuation"])
def test_a_libpq_keyword_dsn_is_postgresql_and_never_an_sqlite_file(served_project, cli, monkeypatch, password):
    """Finding: `--db "host=... password=..."` (libpq's keyword/value form) was opened as an SQLite
    file named after the string, password included. It is PostgreSQL (here unreachable: 503),
    its password hidden, quoted or bare (a bare libpq value runs to the next space, `#`, `,` and
    `;` included: the review found all but `Zx9` shown), and no file appears."""
    quoted = f"'{password}'" if password == PASSWORD else password
    dsn = f"host=127.0.0.1 port=1 dbname=v user=judge password={quoted} connect_timeout=1"
    monkeypatch.setattr("uvicorn.Server.run", lambda self: None)
    started = cli("serve", "pipelines", "--port", str(free_port()), "--db", dsn)
    assert started.exit_code == 0 and "results in host=127.0.0.1 port=1 dbname=v" in started.stderr, started.output
    with make_client(served_project.root, scripted_model(ANSWER), dsn) as client:
        health = client.get("/healthz")
        judged = client.post("/v1/pipelines/deck/judge", json={"item": deck("<p>A</p>")})
    assert health.status_code == 503 and judged.status_code == 503, judged.text
    for text in (started.output, health.text, judged.text):
        assert password not in text and "kq,Lm" not in text, text
    made = [path.name for path in served_project.root.rglob("*") if "dbname" in path.name or password in path.name]
    assert made == []


def test_a_libpq_keyword_dsn_libpq_cannot_read_is_refused_with_exit_2(served_project, cli, monkeypatch):
    monkeypatch.setattr("uvicorn.Server.run", lambda self: None)        # were it to start, it stops
    done = refused_start(cli, "--db", f"host=127.0.0.1 passwrd={PASSWORD}")
    assert done.exit_code == 2 and done.stderr.startswith("--db"), done.output
    assert "passwrd" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not list(served_project.root.glob("host=*"))


def test_redaction_sees_quoted_and_capitalised_secret_names():
    """One list of secret words and one minimum: a name in any case, a value quoted or bare,
    `=` or `:`; usage placeholders (`KEY=VALUE`) and short words after `:` stay."""
    from runner.redact import redact, remember_url
    fresh = "n0t-remembered-elsewhere"       # a value no other test's DSN made runner remember
    said = redact(f"host=db password='{fresh}' PASSWORD={fresh}x Api_Key: sk-{fresh} "
                  f"password = \"{fresh}y\" Authorization: Bearer {fresh}z", frozenset())
    assert said == "host=db password=*** PASSWORD=*** Api_Key: *** password = *** Authorization: Bearer ***", said
    for kept in ("--set KEY=VALUE", "--grid KEY=V1,V2", "unexpected token: 'end'", "max_tokens=512",
                 '{"answer_key": "B-12345678"}'):       # JSON (a model's answer) stays JSON
        assert redact(kept, frozenset()) == kept
    remember_url("host=db password='two words-9'")
    assert redact("it said two words-9", frozenset()) == "it said ***"


def refused_start(cli, *args: str):
    """`runner serve` refused before it binds (it never starts serving), in this process."""
    return cli("serve", "pipelines", "--port", str(free_port()), *args)


def test_a_token_file_cache_folder_or_tracer_serve_cannot_use_is_refused_before_it_starts(served_project, cli):
    """As `runner run` refuses them: before, a token file not UTF-8 was a traceback, and a cache
    folder that is a file or an unknown --trace started a server that blamed every request."""
    (served_project.root / "token").write_bytes(b"\xff\xfe\x00garbage-garbage-garbage")
    (served_project.root / "afile").write_text("x\n")
    for args, message in ((("--host", "0.0.0.0", "--token-file", "token"),
                           "--token-file token: not UTF-8 text (a token is one line of text)"),
                          (("--cache-dir", "afile"), "give another --cache-dir"),
                          (("--trace", "bogus"), "--trace bogus: choose from mlflow, none")):
        done = refused_start(cli, *args)
        assert done.exit_code == 2 and message in done.stderr, done.output
        assert "Traceback" not in done.output and "runner serve: http" not in done.output


@pytest.mark.parametrize("db", ["mysql://x@y/z", "not-a-database.txt"])
def test_issue63_s11_a_bad_db_is_one_message_and_exit_2_before_the_banner(served_project, cli, db):
    (served_project.root / "not-a-database.txt").write_text("hello, I am text\n" * 100)
    done = refused_start(cli, "--db", db)
    assert done.exit_code == 2, done.output
    assert "Traceback" not in done.output and "runner serve: http" not in done.output
    assert done.stderr.startswith("--db") and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_issue63_s6_max_body_holds_whatever_the_content_type(served_project):
    """S6: a body labelled multipart on a JSON route meets the JSON routes' limit (413, declared
    or streamed); a job's upload keeps the larger upload limit."""
    limits = Limits(max_body=4096, max_upload=1 << 20, allowed_hosts=None)
    multipart = {"content-type": "multipart/form-data; boundary=x"}
    with make_client(served_project.root, scripted_model(ANSWER), str(served_project.root / "r.sqlite"),
                     limits) as client:
        declared = client.post("/v1/pipelines/deck/judge", content=b"\0" * 200_000, headers=multipart)
        assert declared.status_code == 413 and "4,096 bytes" in declared.json()["error"]
        streamed = client.post("/v1/pipelines/deck/judge", content=iter([b"\0" * 8192] * 25), headers=multipart)
        assert streamed.status_code == 413 and streamed.json()["error"]
        feedback = client.post("/v1/results/k/feedback?pipeline=deck", content=b"\0" * 200_000, headers=multipart)
        assert feedback.status_code == 413
        lines = "".join(json.dumps(deck(f"<p>{n}</p>")) + "\n" for n in range(200))
        assert len(lines) > 4096
        job = client.post("/v1/pipelines/deck/jobs", files={"file": ("decks.jsonl", lines.encode())})
        assert job.status_code == 202, job.text
        client.delete(f"/v1/jobs/{job.json()['id']}")


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_issue63_s7_deeply_nested_json_is_400_never_500(served):
    """S7: a /jobs body of 990 `[`, a multipart `params` 5,000 deep, a /judge param 900 deep."""
    jobs = served.client.post("/v1/pipelines/deck/jobs", content=b"[" * 990,
                              headers={"content-type": "application/json"})
    params = served.client.post("/v1/pipelines/deck/jobs", data={"params": nested(5000)},
                                files={"file": ("d.jsonl", json.dumps(deck("<p>A</p>")).encode())})
    body = '{"item": {"x": 1}, "params": {"pass_score": ' + nested(900) + "}}"
    judged = served.client.post("/v1/pipelines/deck/judge", content=body.encode(),
                                headers={"content-type": "application/json"})
    for answer in (jobs, params, judged):
        assert answer.status_code == 400, answer.text
        assert "nested too deeply" in answer.json()["error"]


def test_issue63_s12_a_nul_byte_in_a_key_is_400(served):
    """S12: on PostgreSQL a NUL byte gave 503 and dropped the connection; on both stores it is 400."""
    for url in ("/v1/results/a%00b?pipeline=deck", "/v1/results/ab?pipeline=de%00ck",
                "/v1/results/a%00b/feedback?pipeline=deck"):
        answer = served.client.get(url) if "feedback" not in url else served.client.post(
            url, json={"rating": "up", "user": "ann"})
        assert answer.status_code == 400 and "NUL" in answer.json()["error"], answer.text
    assert served.client.get("/healthz").json()["store"] == "ok"


def test_issue63_s13_host_case_options_and_a_document_that_refuses_what_the_server_does(served_project):
    """S13: `Host: LOCALHOST` is loopback; OPTIONS' Allow names DELETE where it applies; the
    document refuses `{"item": null, "items": null}` as the server does."""
    import jsonschema
    with make_client(served_project.root, scripted_model(ANSWER), str(served_project.root / "r.sqlite"),
                     Limits(allowed_hosts=["127.0.0.1", "localhost", "testserver"])) as client:
        assert client.get("/healthz", headers={"host": "LOCALHOST:8000"}).status_code == 200
        assert client.get("/healthz", headers={"host": "Evil.example"}).status_code == 400
        for sent in ({"origin": "http://evil.example"}, {"origin": "null"}, {"sec-fetch-site": "cross-site"}):
            forged = client.post("/v1/pipelines/deck/jobs", files={"file": ("a.jsonl", b"{}\n")}, headers=sent)
            assert forged.status_code == 403 and "another site" in forged.json()["error"], sent
        own = client.post("/v1/pipelines/deck/judge", json={"item": None, "items": None},
                          headers={"origin": "http://localhost:8000", "host": "localhost:8000"})
        assert own.status_code == 400           # its own page's request is read (and this one is wrong)
        options = client.options("/v1/jobs/some-id")
        assert options.status_code == 204 and set(options.headers["allow"].split(", ")) == {"GET", "DELETE", "OPTIONS"}
        wrong = client.put("/v1/jobs/some-id")
        assert wrong.status_code == 405 and "DELETE" in wrong.headers["allow"]
        both_null = {"item": None, "items": None}
        assert client.post("/v1/pipelines/deck/judge", json=both_null).status_code == 400
        schema = client.get("/openapi.json").json()["components"]["schemas"]["JudgeRequest"]
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(both_null, schema)
        jsonschema.validate({"item": None}, schema)
    with make_client(served_project.root, scripted_model(ANSWER), str(served_project.root / "r.sqlite"),
                     Limits(token="t" * 32)) as client:     # a page cannot send the token: a proxy's Host is no matter
        proxied = client.post("/v1/pipelines/deck/judge", json={"item": None, "items": None},
                              headers={"origin": "https://judge.example", "authorization": "Bearer " + "t" * 32})
        assert proxied.status_code == 400


def test_issue62_9_the_document_says_400_with_error_and_the_bearer_token(served_project):
    """Issue 62 #9: no FastAPI 422 shape; 400 `{"error"}` everywhere, 413, 415 and 503 where
    sent; a bearer security scheme (required with a token); feedback's `user` required."""
    with make_client(served_project.root, scripted_model(ANSWER), str(served_project.root / "r.sqlite"),
                     Limits(token="t" * 32)) as client:
        spec = client.get("/openapi.json").json()
        refused = client.post("/v1/pipelines/deck/judge", json={"items": "nope"},
                              headers={"authorization": "Bearer " + "t" * 32})
    assert refused.status_code == 400 and set(refused.json()) == {"error"}
    assert "422" not in json.dumps(spec) and "HTTPValidationError" not in spec["components"]["schemas"]
    assert spec["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "description": spec["components"]["securitySchemes"]["bearer"]["description"]}
    error = {"$ref": "#/components/schemas/ErrorBody"}
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            for status in ("400", "413"):
                assert operation["responses"][status]["content"]["application/json"]["schema"] == error, (path, method)
            if path.startswith("/v1/"):
                assert operation["security"] == [{"bearer": []}] and "401" in operation["responses"]
    assert "415" in spec["paths"]["/v1/pipelines/{name}/jobs"]["post"]["responses"]
    assert "503" in spec["paths"]["/v1/pipelines/{name}/judge"]["post"]["responses"]
    assert "user" in spec["components"]["schemas"]["FeedbackRequest"]["required"]


@pytest.mark.slow
def test_issue62_9_serve_takes_set_and_model_as_run_does(served_project, fake_llm):
    """Issue 62 #9: a judge whose YAML names one model is served against another (a local
    server) and with another param, without editing the YAML."""
    fake_llm.script(ANSWER)
    server = Process(served_project.root, "--model", f"judge=openai/local-judge@{fake_llm.url}",
                     "--set", "params.green_at=70").ready()
    try:
        [described] = httpx.get(f"{server.url}/v1/pipelines", timeout=10).json()["pipelines"]
        judged = httpx.post(f"{server.url}/v1/pipelines/deck/judge", json={"item": deck("<p>A</p>")}, timeout=60)
    finally:
        server.stop()
    assert described["params"]["green_at"] == 70
    assert judged.status_code == 200 and judged.json()["counts"] == {"judged": 1, "errors": 0, "store": 0, "cache": 0}, judged.text
    assert [r.body["model"] for r in fake_llm.requests] == ["local-judge"]
    assert "Green at 70" in json.dumps(fake_llm.requests[0].body)


def test_issue62_9_a_set_serve_cannot_apply_is_refused_before_it_starts(served_project, cli):
    done = refused_start(cli, "--set", "params.green_at=high")
    assert done.exit_code == 2 and "deck.yaml" in done.stderr and "green_at" in done.stderr, done.output
    assert "runner serve: http" not in done.output and "Traceback" not in done.output


def test_a_judge_body_with_a_number_past_pythons_digit_limit_is_a_message(served):
    """A /judge body holding an integer of 5,000 digits was FastAPI's 400 "There was an error
    parsing the body": it says what is wrong and where, as the jobs route does."""
    body = '{"item": {"x": ' + "9" * 5000 + "}}"
    answer = served.client.post("/v1/pipelines/deck/judge", content=body.encode(),
                                headers={"content-type": "application/json"})
    assert answer.status_code == 400, answer.text
    assert answer.json() == {"error": "the body: a number of more than 4300 digits, past what runner reads "
                                      "(write it as a string)"}
