"""POST /v1/pipelines/{name}/judge and the results store behind it."""

from __future__ import annotations

import json

from serve_fixtures import deck


def test_a_deck_is_judged_then_answered_from_the_store(served):
    first = served.judge(deck("<p>A</p>", "<p>B</p>"))
    assert first.status_code == 200, first.text
    body = first.json()
    assert [r["source"] for r in body["results"]] == ["judged", "judged"]
    assert [r["result"]["rating"] for r in body["results"]] == ["green", "green"]
    again = served.judge(deck("<p>A</p>", "<p>B!</p>")).json()
    assert [r["source"] for r in again["results"]] == ["store", "judged"]
    assert again["results"][0]["item_key"] == body["results"][0]["item_key"]
    assert len(served.model.prompts) == 3
    assert json.loads(json.dumps(again["counts"])) == {"store": 1, "judged": 1}
