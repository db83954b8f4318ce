"""`runner serve`'s HTTP surface against hostile and careless clients (issue 63 S3, S6, S7,
S11, S12, S13; issue 62 #9): credentials in --db, body limits whatever the Content-Type,
deep JSON, a bad --db, NUL bytes, Host case, OPTIONS, and the OpenAPI document."""

from __future__ import annotations

import httpx

from serve_fixtures import Process, deck

PASSWORD = "hunter2secret"


def test_issue63_s3_a_query_password_in_db_never_shows(served_project):
    """S3 (issue 61 "one redaction"): `?password=` in --db is hidden in the start line, in 503
    bodies and in /healthz, which needs no token."""
    url = f"postgresql://judge@127.0.0.1:1/v?password={PASSWORD}&sslpassword=other-secret-9"
    server = Process(served_project.root, "--db", url).ready()
    try:
        health = httpx.get(f"{server.url}/healthz", timeout=10)
        judged = httpx.post(f"{server.url}/v1/pipelines/deck/judge", json={"item": deck("<p>A</p>")}, timeout=30)
        assert health.status_code == 503 and judged.status_code == 503, judged.text
        for text in (health.text, judged.text):
            assert PASSWORD not in text and "other-secret-9" not in text
    finally:
        server.stop()
    log = server.log.read_text()
    assert "runner serve: http://127.0.0.1:" in log and "password=***" in log, log
    assert PASSWORD not in log and "other-secret-9" not in log


def test_issue61_one_redaction_hides_query_credentials_and_keeps_ordinary_words():
    """Issue 61: one list of secret names and one minimum, for URL userinfo and the query
    credentials of libpq and URLs, wherever a message is made."""
    from runner.redact import MIN_SECRET, redact
    text = ("postgresql://judge:pw@db/v?sslpassword=abc&application_name=x host=a password=pw "
            "https://h/v1?api_key=k1&token=t2 max_tokens=512")
    assert redact(text, frozenset()) == ("postgresql://***@db/v?sslpassword=***&application_name=x host=a "
                                         "password=*** https://h/v1?api_key=***&token=*** max_tokens=512")
    assert MIN_SECRET == 8
