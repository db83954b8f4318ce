"""`runner view` over HTTP: runs page, run page, item page, reviews, confinement, escaping."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from helpers import run, write_json
from runner.errors import RunnerError
from runner.view.app import create_app
from runner.view.catalog import list_runs, run_folder

TOKEN = "secret-token"


def client(reports: Path) -> TestClient:
    return TestClient(create_app(reports, token=TOKEN), base_url="http://127.0.0.1")


def listing(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime for p in root.rglob("*")
            if ".runner-view" not in p.parts and p.name != "reviews.sqlite" and not p.name.startswith("reviews.sqlite")}


def test_pages_escape_values_and_browsing_changes_no_run(reports):
    before = listing(reports)
    web = client(reports)
    [entry] = list_runs(reports)
    home = web.get("/")
    assert home.status_code == 200 and entry.path in home.text
    page = web.get(f"/run/{entry.path}")
    assert page.status_code == 200
    assert "<script>alert(1)</script>" not in page.text
    item = web.get(f"/run/{entry.path}/item/1")
    assert item.status_code == 200 and "<script>alert(1)</script>" not in item.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in item.text
    assert web.get(f"/run/{entry.path}/item/99").status_code == 404
    assert listing(reports) == before


@pytest.mark.parametrize("bad", ["%2e%2e/%2e%2e", "/etc", "..%2f..%2fetc", "t/%2e%2e/%2e%2e"])
def test_paths_outside_reports_are_not_found(reports, bad):
    answer = client(reports).get(f"/run/{bad}")
    assert answer.status_code == 404
    assert "root:" not in answer.text


@pytest.mark.parametrize("bad", ["..", "t/../..", "/etc", "t/./r1", ""])
def test_run_folder_refuses_dot_segments_and_absolute_paths(reports, bad):
    with pytest.raises(RunnerError):
        run_folder(reports, bad)


def _call_line(item: int, prompt: str, answer: str) -> str:
    return json.dumps({"item": item, "call": f"{item}.1", "step": "ask", "model": "m", "model_id": "openai/m1",
                       "messages": [{"role": "user", "content": prompt}], "answer": answer, "cached": False,
                       "attempts": 1, "latency_ms": 5, "error": None}) + "\n"


def test_an_items_page_shows_its_calls_from_calls_jsonl(reports):
    [entry] = list_runs(reports)
    (reports / entry.path / "calls.jsonl").write_text(
        _call_line(2, "Is <b>plain</b> right?", '{"verdict": "yes"}') + _call_line(3, "other item", "no"))
    page = client(reports).get(f"/run/{entry.path}/item/2")
    assert page.status_code == 200
    assert "Is &lt;b&gt;plain&lt;/b&gt; right?" in page.text and "{&#34;verdict&#34;: &#34;yes&#34;}" in page.text
    assert "call 2.1: item 2, step ask, model m (openai/m1)" in page.text and "other item" not in page.text


def test_a_calls_file_that_is_a_link_is_not_followed(reports, tmp_path):
    [entry] = list_runs(reports)
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text(_call_line(2, "from outside the run folder", "secret"))
    (reports / entry.path / "calls.jsonl").symlink_to(outside)
    page = client(reports).get(f"/run/{entry.path}/item/2")
    assert page.status_code == 200 and "from outside the run folder" not in page.text


def test_a_symlink_out_of_reports_is_not_served(reports, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    [entry] = list_runs(reports)
    for name in os.listdir(reports / entry.path):
        source = reports / entry.path / name
        if source.is_file():
            (outside / name).write_bytes(source.read_bytes())
    (reports / "escape").symlink_to(outside)
    assert client(reports).get("/run/escape").status_code == 404


def test_foreign_host_is_refused(reports):
    web = TestClient(create_app(reports, token=TOKEN), base_url="http://evil.example")
    assert web.get("/").status_code == 400


def test_review_needs_the_token_and_json_and_replaces_per_reviewer(reports):
    web = client(reports)
    [entry] = list_runs(reports)
    body = {"run": entry.path, "index": 2, "agrees": False, "correct": "no", "reviewer": "ann"}
    assert web.post("/api/review", json=body).status_code == 403
    assert web.post("/api/review", json=body, headers={"X-Runner-Token": "wrong"}).status_code == 403
    assert web.post("/api/review", content=json.dumps(body), headers={"X-Runner-Token": TOKEN,
                                                                      "Content-Type": "text/plain"}).status_code == 415
    saved = web.post("/api/review", json=body, headers={"X-Runner-Token": TOKEN})
    assert saved.status_code == 200 and saved.json()["saved"] is True
    again = web.post("/api/review", json={**body, "agrees": True, "correct": None},
                     headers={"X-Runner-Token": TOKEN})
    assert again.status_code == 200
    import sqlite3
    with sqlite3.connect(reports / "reviews.sqlite") as db:
        rows = db.execute("select reviewer, agrees from reviews").fetchall()
    assert rows == [("ann", 1)]


def review(web: TestClient, run_path: str, index: int, agrees: bool, reviewer: str = "ann",
           correct: str | None = None) -> dict:
    answer = web.post("/api/review", json={"run": run_path, "index": index, "agrees": agrees, "reviewer": reviewer,
                                           "correct": correct}, headers={"X-Runner-Token": TOKEN})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_review_follows_the_item_into_a_new_run(project, reports):
    web = client(reports)
    review(web, "t/r1", 2, False, reviewer="bob", correct="no")
    items = write_json(project.root / "moved.json", [{"n": 9, "claim": "new"}, {"n": 2, "claim": "plain"}])
    run(project.root / "pipelines" / "p.yaml", items, out=reports / "t" / "r2")
    page = web.get("/run/t/r2/item/2")
    assert page.status_code == 200 and "bob" in page.text
    assert "bob" not in web.get("/run/t/r2/item/1").text


def test_concurrent_reviewers_lose_nothing(reports):
    from concurrent.futures import ThreadPoolExecutor
    web = client(reports)
    names = [f"reviewer{n}" for n in range(24)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda name: review(web, "t/r1", 1 + len(name) % 3, True, reviewer=name), names))
    import sqlite3
    with sqlite3.connect(reports / "reviews.sqlite") as db:
        stored = {row[0] for row in db.execute("select reviewer from reviews")}
    assert stored == set(names)


def test_exported_labels_and_the_review_store_both_score_the_reviewed_items(reports, tmp_path):
    from typer.testing import CliRunner

    from runner.cli.app import app
    web = client(reports)
    review(web, "t/r1", 1, True)
    review(web, "t/r1", 2, False, correct="no")
    review(web, "t/r1", 3, True)
    labels = tmp_path / "labels.jsonl"
    exported = CliRunner().invoke(app, ["labels", "export", str(reports), "--pipeline", "t", "--out", str(labels)])
    assert exported.exit_code == 0, exported.output
    rows = [json.loads(line) for line in labels.read_text().splitlines()]
    assert sorted(row["label"] for row in rows) == ["no", "no", "yes"]
    for source in (labels, reports / "reviews.sqlite"):
        scored = CliRunner().invoke(app, ["eval", str(reports / "t" / "r1"), "--labels", str(source),
                                          "--key", "item_key", "--truth", "label"])
        assert scored.exit_code == 0, scored.output
        report = json.loads((reports / "t" / "r1" / "eval.json").read_text())
        assert report["scored"] == 3 and report["metrics"]["accuracy"] == pytest.approx(2 / 3, abs=1e-3)


def shown_items(page: str) -> list[int]:
    import re
    return [int(n) for n in re.findall(r'<tr data-index="(\d+)"', page)]


def test_the_run_page_filters_searches_and_sorts(reports):
    web = client(reports)
    assert shown_items(web.get("/run/t/r1").text) == [1, 2, 3]
    assert shown_items(web.get("/run/t/r1?verdict=yes").text) == [2, 3]
    assert shown_items(web.get("/run/t/r1?verdict=no").text) == [1]
    assert shown_items(web.get("/run/t/r1?field=claim&value=plain").text) == [2]
    assert shown_items(web.get("/run/t/r1?q=other").text) == [3]
    assert shown_items(web.get("/run/t/r1?errors=1").text) == []
    assert shown_items(web.get("/run/t/r1?sort=index&desc=1").text) == [3, 2, 1]


def test_compare_shows_the_diff_and_refuses_other_inputs_unless_forced(project, reports):
    web = client(reports)
    pipeline = project.root / "pipelines" / "p.yaml"
    run(pipeline, project.root / "in.json", out=reports / "t" / "same")
    run(pipeline, write_json(project.root / "other.json", [{"n": 1, "claim": "x"}]), out=reports / "t" / "other")
    same = web.get("/compare?run=t/r1&run=t/same")
    assert same.status_code == 200 and "<script>alert(1)</script>" not in same.text
    assert "0 item(s) changed" in same.text and "compare anyway" not in same.text
    refused = web.get("/compare?run=t/r1&run=t/other")
    forced = web.get("/compare?run=t/r1&run=t/other&force=1")
    assert refused.status_code == 200 and forced.status_code == 200
    assert "compare anyway" in refused.text and "item(s) changed" not in refused.text
    assert "compare anyway" not in forced.text and "item(s) changed" in forced.text
    assert web.get("/compare?run=t/r1").status_code == 400
