"""Jobs and `/judge` that say what really happened (issues 61, 62 and 63): a CSV upload read
by the pipeline's own csv adapter, results keyed by what made them, a resumed job that does
not keep results of another pipeline, a cancel that lands before the first step, jobs claimed
by one server only, and counts that tell errors from judged items."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from test_jobs import lines, wait

from helpers import scripted_model
from runner.serve.app import Parts
from runner.serve.http import ApiError
from runner.serve.job_files import InputWriter
from runner.serve.judging import Settings
from serve_fixtures import deck, gated_model, make_client


def parts(root: Path, model: Any) -> Parts:
    return Parts(Settings(root=root, cache_dir=root / "cache", transport=model), root / "pipelines", None)


def input_file(root: Path, *records: Any) -> Path:
    writer = InputWriter(root)
    writer.records_of(records)
    return writer.close()


def test_issue_63_s5_a_cancel_between_dequeue_and_the_first_step_cancels_the_job(served_project):
    """S5: a DELETE landing after a worker took the job from the queue but before its run began
    makes it `cancelled`, on disk too: it is not queued for ever nor run at the next start."""
    model = scripted_model(json.dumps({"rating": "green", "score": 90}))

    async def scenario() -> dict[str, Any]:
        server = parts(served_project.root, model)
        await server.open()
        try:
            variant = await server.judging.variant("deck")
            job = server.jobs.submit("deck", {}, input_file(served_project.root, deck("<p>A</p>")), variant.hash)
            await asyncio.sleep(0)
            cancelled = await server.jobs.cancel(job.id)
            assert cancelled.status == "cancelled"
        finally:
            await server.close()
        return json.loads((served_project.root / "reports" / ".runner-serve" / "jobs" / f"{job.id}.json").read_text())
    record = asyncio.run(scenario())
    assert record["status"] == "cancelled" and record["ended_at"]
    with make_client(served_project.root, model) as client:     # the next start leaves it alone
        assert client.get(f"/v1/jobs/{record['id']}").json()["status"] == "cancelled"
    assert model.requests == []


def test_issue_62_8_judge_counts_an_errored_item_as_an_error_and_a_job_of_errors_fails(served_project):
    """Issue 62 #8: /judge's counts say judged, errors, store and cache (an errored item is an
    error, not judged); a job whose items all errored is `failed`, one with some errored says
    how many in its counts."""
    from helpers import server_error
    model = scripted_model(json.dumps({"rating": "green", "score": 90}))
    model.script(server_error("model overloaded"), contains="bad")
    with make_client(served_project.root, model) as client:
        answer = client.post("/v1/pipelines/deck/judge", json={"items": [deck("<p>bad A</p>")]}).json()
        assert answer["counts"] == {"judged": 0, "errors": 1, "store": 0, "cache": 0}, answer
        job = client.post("/v1/pipelines/deck/jobs", json={"items": [deck("<p>bad B</p>", "<p>bad C</p>")]}).json()
        done = wait(client, job["id"])
        assert done["status"] == "failed" and done["counts"]["errors"] == 2 and done["counts"]["judged"] == 0, done
        assert "every item errored (2 of 2)" in done["error"] and "model overloaded" in done["error"]
        job = client.post("/v1/pipelines/deck/jobs", json={"items": [deck("<p>D</p>", "<p>bad E</p>")]}).json()
        done = wait(client, job["id"])
        assert done["status"] == "succeeded" and done["counts"]["errors"] == 1 and done["counts"]["judged"] == 1
        answer = client.post("/v1/pipelines/deck/judge", json={"items": [deck("<p>D</p>", "<p>bad F</p>")]}).json()
        assert answer["counts"] == {"judged": 0, "errors": 1, "store": 1, "cache": 0}, answer


TRIAGE = """
version: 1
name: triage
input: {adapter: csv, with: {types: {urgent: boolean, score: number}, delimiter: ";"}}
steps:
  - id: route
    uses: decide
    with:
      rules:
        - {when: "item.urgent", verdict: ESCALATE}
        - {when: "item.score > 0.5", verdict: PASS}
        - {verdict: FAIL}
output:
  verdict: "{{ steps.route.verdict }}"
"""
ROWS = 'id;urgent;score;note\n1;false;0.9;ok\n4;false;0.7;extra;cell\n5;false\n6;"no;0.8;x\n7;yes;0.1;y\n'


def _outcomes(results: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["index"], r.get("verdict"), r.get("error", "").split(": ", 1)[-1]) for r in results]


def test_issue_63_s2_a_csv_upload_is_read_by_the_pipelines_own_csv_adapter(served_project, cli):
    """S2 (issue 61's one CSV reader): a CSV uploaded to a job is read with the pipeline's own
    `with.types` and `delimiter`, and each row that cannot be read is that item's error,
    exactly as `runner run --input` judges the same file."""
    served_project.pipeline(TRIAGE, "triage.yaml")
    (served_project.root / "rows.csv").write_text(ROWS, encoding="utf-8")
    ran = cli("run", "pipelines/triage.yaml", "--input", "rows.csv", "--out", "out")
    expected = _outcomes([json.loads(line) for line in (served_project.root / "out" / "results.jsonl")
                         .read_text().splitlines()])
    assert [verdict for _, verdict, _ in expected][:1] == ["PASS"], ran.output
    with make_client(served_project.root, scripted_model()) as client:
        job = client.post("/v1/pipelines/triage/jobs", files={"file": ("rows.csv", ROWS.encode())})
        assert job.status_code == 202, job.text
        done = wait(client, job.json()["id"])
        got = _outcomes(lines(client.get(f"/v1/jobs/{done['id']}/results")))
    assert got == expected
    assert sum(1 for _, _, error in got if error) >= 2 and done["counts"]["errors"] == sum(1 for *_, e in got if e)


@pytest.mark.parametrize("adapter, name, text", [
    ("yaml", "rows.yaml", "- {id: 1, urgent: false, score: 0.9}\n- {id: 7, urgent: true, score: 0.1}\n"),
    ("yaml", "rows.yml", "- {id: 1, urgent: false, score: 0.9}\n- {id: 2, urgent: false, score: 0.2}\n"),
    ("json", "rows.json", '[{"id": 1, "urgent": false, "score": 0.9}, {"id": 2, "urgent": false, "score": 0.2}]'),
    ("jsonl", "rows.json", '[{"id": 1, "urgent": false, "score": 0.9}, {"id": 2, "urgent": false, "score": 0.2}]'),
])
def test_a_json_or_yaml_upload_is_read_by_the_adapter_its_name_says(served_project, cli, adapter, name, text):
    """A YAML list uploaded to a YAML pipeline's job was read as JSON lines (every item an
    error, the job `failed`), and a JSON array as one item. The upload's name says its format,
    as `--input-format` does for `runner run`, which judges the file the same (found by
    uploading hostile and plain files of every kind)."""
    served_project.pipeline(TRIAGE.replace('adapter: csv, with: {types: {urgent: boolean, score: number}, '
                                           'delimiter: ";"}', f"adapter: {adapter}"), "triage.yaml")
    (served_project.root / name).write_text(text, encoding="utf-8")
    kind = "json" if name.endswith(".json") else "yaml"
    ran = cli("run", "pipelines/triage.yaml", "--input", name, "--input-format", kind, "--out", "out")
    assert ran.exit_code == 0, ran.output
    expected = _outcomes([json.loads(line) for line in (served_project.root / "out" / "results.jsonl")
                         .read_text().splitlines()])
    with make_client(served_project.root, scripted_model()) as client:
        job = client.post("/v1/pipelines/triage/jobs", files={"file": (name, text.encode())})
        assert job.status_code == 202, job.text
        done = wait(client, job.json()["id"])
        got = _outcomes(lines(client.get(f"/v1/jobs/{done['id']}/results")))
    assert done["status"] == "succeeded" and got == expected and len(got) == 2, (done, got)


@pytest.mark.parametrize("name, text, says", [
    ("rows.yaml", "- {id: 1\n- {id: 2}\n", "the YAML upload:2:"),
    ("rows.json", '[{"id": 1}, {"id": ]', "the JSON upload:1:20: not valid JSON"),
])
def test_a_json_or_yaml_upload_that_cannot_be_read_is_refused_when_sent(served_project, name, text, says):
    """(review) Such an upload was accepted (202), then its job failed naming the server's own
    path to it; it is refused at once, as a CSV upload without a header is."""
    served_project.pipeline(TRIAGE.replace('adapter: csv, with: {types: {urgent: boolean, score: number}, '
                                           'delimiter: ";"}', "adapter: yaml"), "triage.yaml")
    with make_client(served_project.root, scripted_model()) as client:
        refused = client.post("/v1/pipelines/triage/jobs", files={"file": (name, text.encode())})
    assert refused.status_code == 400 and says in refused.json()["error"], refused.text
    assert str(served_project.root) not in refused.text
    uploads = served_project.root / "reports" / ".runner-serve" / "inputs"
    assert not uploads.exists() or not any(uploads.iterdir())         # a refused upload keeps no file


def test_issue_63_s8_a_csv_cell_over_the_field_limit_is_an_item_error(served_project):
    """S8: a 200 KB quoted cell (over the csv module's field limit) is that row's error; the
    other rows are judged; never a 500."""
    served_project.pipeline(TRIAGE.replace(', delimiter: ";"', ""), "triage.yaml")
    big = "x" * 200_000
    text = f'id,urgent,score,note\n1,false,0.9,ok\n2,false,0.9,"{big}"\n3,true,0.2,fine\n'
    with make_client(served_project.root, scripted_model()) as client:
        job = client.post("/v1/pipelines/triage/jobs", files={"file": ("big.csv", text.encode())})
        assert job.status_code == 202, job.text
        done = wait(client, job.json()["id"])
        results = lines(client.get(f"/v1/jobs/{done['id']}/results"))
    assert done["status"] == "succeeded" and done["counts"]["errors"] == 1
    assert [r.get("verdict") for r in results] == ["PASS", None, "ESCALATE"]
    assert "field larger than field limit" in results[1]["error"]


def test_a_csv_upload_without_a_usable_header_is_refused_when_sent(served_project):
    served_project.pipeline(TRIAGE, "triage.yaml")
    with make_client(served_project.root, scripted_model()) as client:
        refused = client.post("/v1/pipelines/triage/jobs", files={"file": ("rows.csv", b"id;score;note\n1;2;3\n")})
    assert refused.status_code == 400 and "urgent" in refused.json()["error"], refused.text
    assert "the CSV upload" in refused.json()["error"] and str(served_project.root) not in refused.json()["error"]


def test_issue_63_s4_a_job_resumed_under_another_pipeline_is_judged_again_and_says_so(served_project):
    """S4 (issue 61, keys that say what made a result): a job stopped mid-run, its prompt edited,
    then taken up again keeps none of the results the old prompt judged: every item is judged
    again under the new pipeline, and the job's record says why. (With the pipeline unchanged
    it resumes: tests/serve/test_jobs.py and the kill -9 test in test_server_process.py.)"""
    model, gate = gated_model(2)
    slides = [f"<p>slide {n}</p>" for n in range(4)]
    with make_client(served_project.root, model) as client:
        job = client.post("/v1/pipelines/deck/jobs", json={"items": [deck(*slides)]}).json()
        wait(client, job["id"], ("running",))
        while client.get(f"/v1/jobs/{job['id']}").json()["counts"]["done"] < 2:
            time.sleep(0.02)
        time.sleep(0.2)
        first = client.get(f"/v1/jobs/{job['id']}").json()
    path = served_project.root / "pipelines" / "deck.yaml"
    path.write_text(path.read_text().replace("Slide: {{ item.html }}", "The slide: {{ item.html }}"))
    gate["open"] = 100
    model.requests.clear()
    with make_client(served_project.root, model) as client:
        done = wait(client, job["id"])
        results = lines(client.get(f"/v1/jobs/{job['id']}/results"))
    assert done["status"] == "succeeded" and done["run"] == first["run"]
    assert done["pipeline_hash"] != first["pipeline_hash"]
    assert done["counts"]["resumed"] == 0 and done["counts"]["judged"] == 4, done
    assert len(results) == 4 and sorted(r.prompt.count("The slide:") for r in model.requests) == [1, 1, 1, 1]
    assert any(f"{first['pipeline_hash']} -> {done['pipeline_hash']}" in note and "judged again" in note
               for note in done["notes"]), done


MEMO_DECK = """
version: 1
name: memodeck
input: {adapter: json, explode: slides, parent_as: deck}
params: {data_root: data}
models:
  judge: {model: openai/scripted, retries: 0}
memo: {key: "{{ item.html | sha256 }}", store: memo.json}
steps:
  - id: table
    uses: read_table
    with: {root: "{{ params.data_root }}", file: revenue.csv}
  - id: ask
    uses: llm
    with:
      model: judge
      prompt: "Rows: {{ steps.table.rows }}. Slide: {{ item.html }}."
      output_schema: verdict.schema.json
output:
  rating: "{{ steps.ask.output.rating }}"
"""


def memo_project(project: Any) -> Any:
    project.pipeline(MEMO_DECK, "memodeck.yaml")
    project.file("data/revenue.csv", "quarter,revenue\nQ1,8.1\n")      # the slide says 9.9: red
    project.file("data2/revenue.csv", "quarter,revenue\nQ1,9.9\n")     # green
    model = scripted_model(json.dumps({"rating": "green", "score": 90}))
    model.script(json.dumps({"rating": "red", "score": 10}), contains="8.1")
    return model


def test_issue_63_s1_jobs_with_other_params_never_share_memo_results(served_project):
    """S1 (issue 61, keys that say what made a result): two jobs on one deck whose params read
    other data: the second is judged on its own data (red), not handed the first's memo
    (green); a memo hit is counted as memo, never as judged."""
    model = memo_project(served_project)
    slide = deck("<p>Q1 revenue 9.9</p>")
    with make_client(served_project.root, model) as client:
        first = client.post("/v1/pipelines/memodeck/jobs", json={"items": [slide], "params": {"data_root": "data2"}})
        done = wait(client, first.json()["id"])
        assert done["status"] == "succeeded" and done["counts"]["judged"] == 1
        second = client.post("/v1/pipelines/memodeck/jobs", json={"items": [slide], "params": {"data_root": "data"}})
        done = wait(client, second.json()["id"])
        results = lines(client.get(f"/v1/jobs/{done['id']}/results"))
        assert [r["rating"] for r in results] == ["red"] and not results[0].get("memo_hit")
        assert done["counts"]["memo"] == 0 and done["counts"]["judged"] == 1, done
        summary = json.loads((served_project.root / done["run"] / "summary.json").read_text())
        assert summary["memo"]["reused"] == 0
    # with the server's store emptied, the memo answers the same job: counted as memo
    (served_project.root / "results.sqlite").unlink()
    with make_client(served_project.root, model) as client:
        third = client.post("/v1/pipelines/memodeck/jobs", json={"items": [slide], "params": {"data_root": "data"}})
        done = wait(client, third.json()["id"])
        assert [r["rating"] for r in lines(client.get(f"/v1/jobs/{done['id']}/results"))] == ["red"]
        assert done["counts"]["memo"] == 1 and done["counts"]["judged"] == 0, done


def test_issue_63_s10_a_stored_result_does_not_outlive_an_edit_of_a_data_file_it_read(served_project):
    """S10: judged (red), then the data file the item read is edited: the next request judges
    it again (green), never `source: store` with the old verdict."""
    model = memo_project(served_project)
    slide = deck("<p>Q1 revenue 9.9</p>")
    with make_client(served_project.root, model) as client:
        first = client.post("/v1/pipelines/memodeck/judge", json={"items": [slide]}).json()
        assert [(r["source"], r["result"]["rating"]) for r in first["results"]] == [("judged", "red")]
        served_project.file("data/revenue.csv", "quarter,revenue\nQ1,9.9\n")
        again = client.post("/v1/pipelines/memodeck/judge", json={"items": [slide]}).json()
        assert [(r["source"], r["result"]["rating"]) for r in again["results"]] == [("judged", "green")]
        stored = client.post("/v1/pipelines/memodeck/judge", json={"items": [slide]}).json()["results"][0]
        assert stored["source"] == "store" and "_read_files" not in stored["result"]
        shown = client.get(f"/v1/results/{stored['item_key']}", params={"pipeline": "memodeck"}).json()
        assert shown["result"]["rating"] == "green" and "_read_files" not in shown["result"]


def test_issue_63_s10_a_memo_entry_does_not_outlive_an_edit_of_a_data_file_it_read(served_project, cli,
                                                                                     scripted_llm):
    """S10 for `runner run`'s memo: an edited data file judges the item again; unchanged, the
    memo answers; other params (another data folder) are another result."""
    memo_project(served_project)
    scripted_llm.default = scripted_model(json.dumps({"rating": "green", "score": 90})).default
    scripted_llm.script(json.dumps({"rating": "red", "score": 10}), contains="8.1")
    served_project.file("deck.json", json.dumps(deck("<p>Q1 revenue 9.9</p>")))
    seats = ("--set", "models.judge.model=scripted/judge")

    def rated(*more: str) -> tuple[str, bool]:
        done = cli("run", "pipelines/memodeck.yaml", "--input", "deck.json", "--out", "out", *seats, *more)
        assert done.exit_code == 0, done.output
        (result,) = [json.loads(line) for line in (served_project.root / "out" / "results.jsonl").read_text()
                     .splitlines()]
        return result["rating"], bool(result.get("memo_hit"))
    assert rated() == ("red", False)
    assert rated() == ("red", True)
    assert rated("--set", "params.data_root=data2") == ("green", False)
    served_project.file("data/revenue.csv", "quarter,revenue\nQ1,9.9\n")
    assert rated() == ("green", False)


def test_issue_63_s9_two_servers_on_one_project_never_both_take_a_job(served_project):
    """S9: a second server started while the first runs a job (or holds it queued) leaves the
    job to it: only the server that claimed a job runs it; once that server is gone, the next
    server to start takes the job up and finishes it."""
    slow = scripted_model(json.dumps({"rating": "green", "score": 90}))

    async def never(spec, messages, params):
        await asyncio.sleep(3600)
    slow.complete = never
    other = scripted_model(json.dumps({"rating": "green", "score": 90}))

    async def scenario() -> tuple[str, dict[str, Any]]:
        first = parts(served_project.root, slow)
        await first.open()
        variant = await first.judging.variant("deck")
        running = first.jobs.submit("deck", {}, input_file(served_project.root, deck("<p>A</p>")), variant.hash)
        while running.status != "running":
            await asyncio.sleep(0.01)
        second = parts(served_project.root, other)
        await second.open()                  # while the first runs its job
        try:
            await asyncio.sleep(0.3)
            seen = second.jobs.get(running.id)
            assert seen.status == "running" and seen.owner == running.owner != second.jobs.claims.id
            assert other.requests == []                      # the second never took it
            with pytest.raises(ApiError) as refused:
                await second.jobs.cancel(running.id)
            assert refused.value.status == 409 and "another server" in refused.value.message
        finally:
            await second.close()
            await first.close()              # stopped: the job waits for the next start
        return running.id, json.loads((served_project.root / "reports" / ".runner-serve" / "jobs" /
                                       f"{running.id}.json").read_text())
    job_id, record = asyncio.run(scenario())
    assert record["status"] == "queued"
    with make_client(served_project.root, other) as client:
        done = wait(client, job_id)
    assert done["status"] == "succeeded" and len(other.requests) == 1
    sidecars = list((served_project.root / "reports" / ".runner-serve" / "jobs").glob("*.resume*"))
    assert sidecars == []


def test_issue_62_6_a_job_cancelled_before_any_item_has_no_rate(served_project):
    """Issue 62 #6: a job cancelled with 0 judged items has no pass rate: its summary says
    `null` with the reason `no item in the run`, and `runner view` shows that, never `0.0%`."""
    from starlette.testclient import TestClient

    from runner.view.app import create_app
    path = served_project.root / "pipelines" / "deck.yaml"
    path.write_text(path.read_text().replace("  count_by: rating", "  count_by: rating\n"
                                             "  rates: {pass_rate: \"result.rating == 'green'\"}"))
    model = scripted_model(json.dumps({"rating": "green", "score": 90}))

    async def never(spec, messages, params):
        await asyncio.sleep(3600)
    model.complete = never
    with make_client(served_project.root, model) as client:
        job = client.post("/v1/pipelines/deck/jobs", json={"items": [deck("<p>A</p>", "<p>B</p>")]}).json()
        wait(client, job["id"], ("running",))
        while not client.get(f"/v1/jobs/{job['id']}").json()["run"]:
            time.sleep(0.02)
        cancelled = client.delete(f"/v1/jobs/{job['id']}").json()
    assert cancelled["status"] == "cancelled" and cancelled["counts"]["done"] == 0
    summary = json.loads((served_project.root / cancelled["run"] / "summary.json").read_text())
    assert summary["pass_rate"] is None and summary["pass_rate_reason"] == "no item in the run", summary
    page = TestClient(create_app(served_project.root / "reports", token="secret-token"),
                      base_url="http://127.0.0.1").get("/").text
    assert "pass_rate n/a (0 counted)" in page and "0.0%" not in page


def held(monkeypatch: Any, owner: Any, name: str) -> tuple[threading.Event, threading.Event, list[str]]:
    """`owner.name` held on an event until the test lets it go: (entered, release, order)."""
    entered, release, order = threading.Event(), threading.Event(), []
    real = getattr(owner, name)

    def hold(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        order.append("released" if release.wait(timeout=60) else "gave up")
        return real(*args, **kwargs)
    monkeypatch.setattr(owner, name, hold)
    return entered, release, order


def answered_while_held(client: Any, job_id: str, entered: threading.Event, release: threading.Event,
                        order: list[str]) -> dict[str, Any]:
    """/healthz and the job list answered while the job is held in a worker thread; then the job
    let go, and its record when it ends."""
    assert entered.wait(timeout=60)
    assert client.get("/healthz").status_code == 200
    assert [listed["id"] for listed in client.get("/v1/jobs").json()] == [job_id]
    order.append("answered")
    release.set()
    return wait(client, job_id)


def test_a_jobs_start_never_holds_the_other_requests(served_project, monkeypatch):
    """A job's start reads its input (a big JSON or YAML upload parsed whole: seconds) in a worker
    thread: while it is held there, /healthz and the job list answer; the job then runs, its memo
    store (opened by the start's thread) used by the server's loop."""
    from runner.api import StartedRun
    entered, release, order = held(monkeypatch, StartedRun, "start")
    model = memo_project(served_project)
    rows = json.dumps([deck("<p>Q1 revenue 9.9</p>"), deck("<p>B</p>")])
    with make_client(served_project.root, model) as client:
        job = client.post("/v1/pipelines/memodeck/jobs", files={"file": ("rows.json", rows.encode())}).json()
        done = answered_while_held(client, job["id"], entered, release, order)
    assert order == ["answered", "released"]
    assert done["status"] == "succeeded" and done["counts"]["judged"] == 2, done


@pytest.mark.parametrize("cancels", [1, 2])
def test_a_job_cancelled_while_it_starts_leaves_no_run(served_project, monkeypatch, cancels):
    """A cancel landing while the job's start reads its input in a worker thread waits for it,
    then lets the run go: the job is `cancelled`, no run folder is left, none claimed. A second
    cancel meanwhile (another DELETE) changes nothing."""
    from runner.api import StartedRun
    entered, release, order = held(monkeypatch, StartedRun, "start")
    model = memo_project(served_project)

    async def scenario() -> Any:
        server = parts(served_project.root, model)
        await server.open()
        try:
            variant = await server.judging.variant("memodeck")
            job = server.jobs.submit("memodeck", {}, input_file(served_project.root, deck("<p>A</p>")), variant.hash)
            assert await asyncio.to_thread(entered.wait, 60)
            cancelling = [asyncio.ensure_future(server.jobs.cancel(job.id))]
            await asyncio.sleep(0.05)       # the cancel reaches the job, held in its start
            cancelling += [asyncio.ensure_future(server.jobs.cancel(job.id)) for _ in range(cancels - 1)]
            await asyncio.sleep(0.05)
            release.set()
            return (await asyncio.gather(*cancelling))[0]
        finally:
            await server.close()
    job = asyncio.run(scenario())
    assert job.status == "cancelled" and job.run is None and order == ["released"]
    groups = list((served_project.root / "reports" / "memodeck").iterdir())       # the memo store's home
    assert not [path for group in groups for path in group.iterdir() if path.is_dir()], "a run folder was left"
    assert model.requests == []


def test_a_resumed_jobs_index_of_its_results_never_holds_the_other_requests(served_project, monkeypatch):
    """A job taken up again after a stop indexes what its run wrote (results.jsonl, calls.jsonl: a
    big run's take seconds) in a worker thread: while that is held, /healthz and the job list
    answer; the job then resumes its two results and judges the rest."""
    from runner.serve.job_files import ResumeIndex
    model, gate = gated_model(2)
    with make_client(served_project.root, model) as client:
        job = client.post("/v1/pipelines/deck/jobs", json={"items": [deck(*[f"<p>{n}</p>" for n in range(4)])]}).json()
        deadline = time.monotonic() + 30
        while client.get(f"/v1/jobs/{job['id']}").json()["counts"]["done"] < 2:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        time.sleep(0.2)
    entered, release, order = held(monkeypatch, ResumeIndex, "of")
    gate["open"] = 100
    with make_client(served_project.root, model) as client:
        done = answered_while_held(client, job["id"], entered, release, order)
    assert order == ["answered", "released"]
    assert done["status"] == "succeeded" and done["counts"]["resumed"] == 2 and done["counts"]["judged"] == 2, done
