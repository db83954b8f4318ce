"""Jobs and `/judge` that say what really happened (issues 61, 62 and 63): a CSV upload read
by the pipeline's own csv adapter, results keyed by what made them, a resumed job that does
not keep results of another pipeline, a cancel that lands before the first step, jobs claimed
by one server only, and counts that tell errors from judged items."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from test_jobs import lines, wait

from helpers import scripted_model
from runner.serve.app import Parts
from runner.serve.job_files import InputWriter
from runner.serve.judging import Settings
from serve_fixtures import deck, make_client


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
    model = scripted_model(json.dumps({"rating": "green", "score": 90}))
    gate = {"open": 2}
    original = model.complete

    async def complete(spec, messages, params):       # two answers, then none until the gate opens
        while gate["open"] <= 0:
            await asyncio.sleep(0.01)
        gate["open"] -= 1
        return await original(spec, messages, params)
    model.complete = complete
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
