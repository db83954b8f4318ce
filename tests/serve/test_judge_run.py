"""/judge's run folder: each pipeline variant's items judged by POST /v1/pipelines/{name}/judge
are a run like any other (run.json, calls.jsonl, results.jsonl; summary.json and the reports
when the server stops), which `runner view` lists."""

from __future__ import annotations

import json
import time
from pathlib import Path

from helpers import scripted_model
from runner.llm.calls.file import read_calls
from runner.view.run_list import list_runs
from serve_fixtures import deck, make_client


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def calls_of(run: Path, items: int, limit: float = 30) -> list[dict]:
    """The run's calls once `items` are written (the call log writes within 50 ms)."""
    deadline = time.monotonic() + limit
    while True:
        calls = list(read_calls(run / "calls.jsonl")) if (run / "calls.jsonl").is_file() else []
        if len(calls) >= items or time.monotonic() > deadline:
            return calls
        time.sleep(0.02)


def judge_runs(root: Path, pipeline_hash: str) -> list[Path]:
    return sorted(p for p in (root / "reports" / "deck" / f"judge-{pipeline_hash}").glob("*") if p.is_dir())


def test_judged_items_are_recorded_in_the_variants_run_folder(served_project, db_url):
    root = served_project.root
    model = scripted_model(json.dumps({"rating": "green", "score": 90}))
    with make_client(root, model, db_url) as client:
        assert not (root / "reports" / "deck").exists()         # made by the first item judged, not at start-up
        first = client.post("/v1/pipelines/deck/judge", json={"items": [deck("<p>A</p>", "<p>B</p>")]}).json()
        digest = first["pipeline_hash"]
        [run] = judge_runs(root, digest)
        manifest = json.loads((run / "run.json").read_text())
        assert manifest["kind"] == "serve" and manifest["status"] == "running" and manifest["pipeline"]["name"] == "deck"
        results = lines(run / "results.jsonl")
        assert {r["item_key"]: {k: v for k, v in r.items() if k not in ("index", "item_key")} for r in results} == \
            {r["item_key"]: r["result"] for r in first["results"]}        # what /judge answered
        calls = calls_of(run, 2)
        assert sorted(c["item"] for c in calls) == sorted(r["index"] for r in results)
        assert {"<p>A</p>" in c["messages"][-1]["content"] for c in calls} == {True, False}
        written = {name: (run / name).read_bytes() for name in ("results.jsonl", "calls.jsonl")}
        again = client.post("/v1/pipelines/deck/judge", json={"items": [deck("<p>A</p>", "<p>B</p>")]}).json()
        assert [r["source"] for r in again["results"]] == ["store", "store"]
        assert {name: (run / name).read_bytes() for name in written} == written      # the store's: nothing added
        stricter = client.post("/v1/pipelines/deck/judge", json={"items": [deck("<p>A</p>")],
                                                                 "params": {"green_at": 95}}).json()
        [other] = judge_runs(root, stricter["pipeline_hash"])          # another variant, another run
        assert len(lines(other / "results.jsonl")) == 1
    # the server stopped: each run ends as any run does
    summary = json.loads((run / "summary.json").read_text())
    assert summary["total"] == 2 and summary["errors"] == 0 and summary["counts"] == {"green": 2}
    assert {"report.md", "report.html"} <= {p.name for p in run.iterdir()}
    assert json.loads((run / "run.json").read_text())["status"] == "finished"
    listed = {Path(entry.path).parent.name: entry for entry in list_runs(root / "reports")}
    assert listed[f"judge-{digest}"].state == "finished" and listed[f"judge-{digest}"].total == 2
    assert listed[f"judge-{stricter['pipeline_hash']}"].total == 1


def test_a_server_answering_only_from_the_store_makes_no_run_folder(served_project, db_url):
    root = served_project.root
    model = scripted_model(json.dumps({"rating": "green", "score": 90}))
    with make_client(root, model, db_url) as client:
        digest = client.post("/v1/pipelines/deck/judge", json={"item": deck("<p>A</p>")}).json()["pipeline_hash"]
    with make_client(root, model, db_url) as client:
        stored = client.post("/v1/pipelines/deck/judge", json={"item": deck("<p>A</p>")}).json()
        assert [r["source"] for r in stored["results"]] == ["store"]
        key = stored["results"][0]["item_key"]
        assert client.get(f"/v1/results/{key}", params={"pipeline": "deck"}).status_code == 200
    assert len(judge_runs(root, digest)) == 1 and len(model.requests) == 1


def test_an_evicted_variants_run_ends_as_it_goes(served_project, db_url, monkeypatch):
    monkeypatch.setattr("runner.serve.judging.MAX_VARIANTS", 1)
    root = served_project.root
    model = scripted_model(json.dumps({"rating": "green", "score": 90}))
    with make_client(root, model, db_url) as client:
        stricter = client.post("/v1/pipelines/deck/judge", json={"items": [deck("<p>A</p>")],
                                                                 "params": {"green_at": 95}}).json()
        client.post("/v1/pipelines/deck/judge", json={"items": [deck("<p>B</p>")], "params": {"green_at": 90}})
        [run] = judge_runs(root, stricter["pipeline_hash"])       # its runtime closed while the server runs
        assert json.loads((run / "summary.json").read_text())["total"] == 1
        assert json.loads((run / "run.json").read_text())["status"] == "finished"


def test_a_run_folder_that_cannot_be_written_costs_neither_the_answer_nor_the_stored_result(
        served_project, db_url, monkeypatch, capsys):
    """A full disk under reports/ ends the recording, said once: the request is answered 200,
    the judged result is stored (a retry is not paid again) and run.json says the run failed."""
    from runner.fileio import OutputError
    from runner.runs.results_file import ResultsLog

    def disk_full(self, result, answered=False):
        raise OutputError("results.jsonl: No space left on device")
    monkeypatch.setattr(ResultsLog, "append", disk_full)
    root = served_project.root
    model = scripted_model(json.dumps({"rating": "green", "score": 90}))
    with make_client(root, model, db_url) as client:
        first = client.post("/v1/pipelines/deck/judge", json={"item": deck("<p>A</p>")})
        assert first.status_code == 200 and [r["source"] for r in first.json()["results"]] == ["judged"]
        again = client.post("/v1/pipelines/deck/judge", json={"item": deck("<p>A</p>")}).json()
        assert [r["source"] for r in again["results"]] == ["store"] and len(model.requests) == 1
        other = client.post("/v1/pipelines/deck/judge", json={"item": deck("<p>B</p>")})
        assert other.status_code == 200 and [r["source"] for r in other.json()["results"]] == ["judged"]
    assert capsys.readouterr().err.count("stops recording: results.jsonl: No space left on device") == 1
    [run] = judge_runs(root, first.json()["pipeline_hash"])
    assert json.loads((run / "run.json").read_text())["status"] == "failed"
