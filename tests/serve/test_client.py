"""runner.serve.client against the app (through FastAPI's TestClient, an httpx client)."""

from __future__ import annotations

import pytest

from runner.serve.client import RunnerClient, ServeError
from serve_fixtures import deck


def test_the_client_judges_runs_jobs_and_gives_feedback(served, tmp_path):
    client = RunnerClient(http=served.client)
    assert client.health()["status"] == "ok" and [p["name"] for p in client.pipelines()] == ["deck"]
    answer = client.judge("deck", item=deck("<p>A</p>", "<p>B</p>"))
    assert answer["counts"] == {"judged": 2, "errors": 0, "store": 0, "cache": 0}
    job = client.wait(client.submit("deck", items=[deck("<p>A</p>", "<p>C</p>")])["id"], poll=0.02)
    assert job["status"] == "succeeded" and job["counts"]["store"] == 1
    assert [r["index"] for r in client.results(job["id"])] == [1, 2]
    (tmp_path / "d.jsonl").write_text('{"data": [1], "slides": [{"html": "x"}]}\n')
    uploaded = client.wait(client.submit("deck", file=tmp_path / "d.jsonl", params={"green_at": 70})["id"], poll=0.02)
    assert uploaded["items"] == 1 and uploaded["params"] == {"green_at": 70}
    key = answer["results"][0]["item_key"]
    assert client.result(key, "deck")["result"]["rating"] == "green"
    given = client.feedback(key, "deck", "down", user="ana", label="red", rationale="A is wrong")
    assert given["saved"] and given["review"]["correct"] == "red"
    with pytest.raises(ServeError) as missing:
        client.result("0" * 16, "deck")
    assert missing.value.status == 404
    with pytest.raises(ServeError, match="409"):
        client.cancel(job["id"])
