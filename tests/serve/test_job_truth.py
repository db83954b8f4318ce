"""Jobs and `/judge` that say what really happened (issues 61, 62 and 63): a CSV upload read
by the pipeline's own csv adapter, results keyed by what made them, a resumed job that does
not keep results of another pipeline, a cancel that lands before the first step, jobs claimed
by one server only, and counts that tell errors from judged items."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from helpers import scripted_model
from runner.serve.app import Parts
from runner.serve.job_files import InputWriter
from runner.serve.judging import Settings
from serve_fixtures import deck, make_client
from test_jobs import lines, wait


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
