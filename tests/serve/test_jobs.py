"""Jobs: POST /v1/pipelines/{name}/jobs, GET /v1/jobs/{id}, its results, DELETE; each job a run."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from helpers import scripted_model, server_error
from runner.llm.calls.file import read_calls
from runner.view.run_list import list_runs
from serve_fixtures import DECK_JUDGE, deck, gated_model, make_client

DONE = ("succeeded", "failed", "cancelled")


def wait(client, job_id: str, statuses=DONE, limit: float = 60) -> dict:
    deadline = time.monotonic() + limit
    while True:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in statuses:
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.02)


def lines(response) -> list[dict]:
    return [json.loads(line) for line in response.text.splitlines()]


def test_a_job_is_a_run_with_its_folder(served):
    submitted = served.client.post("/v1/pipelines/deck/jobs", json={"items": [deck("<p>A</p>", "<p>B</p>"),
                                                                              deck("<p>C</p>")]})
    assert submitted.status_code == 202, submitted.text
    job = submitted.json()
    assert submitted.headers["location"] == f"/v1/jobs/{job['id']}" and job["status"] in ("queued", "running")
    done = wait(served.client, job["id"])
    assert done["status"] == "succeeded" and done["items"] == 3 and done["progress"] == 1.0
    assert done["counts"] == {"done": 3, "errors": 0, "resumed": 0, "store": 0, "memo": 0, "judged": 3}
    run = served.root / done["run"]
    assert done["run"].startswith("reports/deck/") and {"run.json", "results.jsonl", "calls.jsonl", "summary.json",
                                                        "report.html", "report.md"} <= {p.name for p in run.iterdir()}
    assert sorted(c["item"] for c in read_calls(run / "calls.jsonl")) == [1, 2, 3]      # each item's call
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["status"] == "finished" and manifest["pipeline"]["name"] == "deck"
    results = lines(served.client.get(f"/v1/jobs/{job['id']}/results"))
    assert [r["index"] for r in results] == [1, 2, 3] and {r["rating"] for r in results} == {"green"}
    assert [Path(r.path).name for r in list_runs(served.root / "reports")] == [run.name]    # runner view sees it
    again = served.judge(deck("<p>A</p>", "<p>B</p>"))
    assert [r["source"] for r in again.json()["results"]] == ["store", "store"]


def test_a_job_takes_stored_results_and_sends_no_call_for_them(served):
    served.judge(deck("<p>A</p>", "<p>B</p>"))
    job = served.client.post("/v1/pipelines/deck/jobs", json={"items": [deck("<p>A</p>", "<p>B</p>", "<p>C</p>")]})
    done = wait(served.client, job.json()["id"])
    assert done["counts"]["store"] == 2 and done["counts"]["judged"] == 1
    assert len(served.model.requests) == 3


def test_jsonl_and_csv_uploads(served_project, served):
    jsonl = "\n".join(json.dumps(deck(f"<p>{n}</p>")) for n in range(3)) + "\n"
    up = served.client.post("/v1/pipelines/deck/jobs", files={"file": ("items.jsonl", jsonl.encode())},
                            data={"params": json.dumps({"green_at": 70})})
    assert up.status_code == 202, up.text
    done = wait(served.client, up.json()["id"])
    assert done["status"] == "succeeded" and done["items"] == 3 and done["params"] == {"green_at": 70}
    assert "Green at 70" in served.model.requests[-1].prompt
    served_project.pipeline("""
        version: 1
        name: rows
        steps: [{id: c, uses: compute, with: {both: "{{ item.a }}-{{ item.b }}"}}]
        output: {both: "{{ steps.c.both }}"}
        """, "rows.yaml")
    csv_job = served.client.post("/v1/pipelines/rows/jobs", files={"file": ("t.csv", "a,b\nx,1\ny,2\n")})
    done = wait(served.client, csv_job.json()["id"])
    assert [r["both"] for r in lines(served.client.get(f"/v1/jobs/{done['id']}/results"))] == ["x-1", "y-2"]


def test_a_job_is_checked_when_it_is_sent(served):
    post = served.client.post
    for response, status, message in (
            (post("/v1/pipelines/deck/jobs", json={"items": [], "params": {"green_at": 500}}), 400,
             "greater than the maximum"),
            (post("/v1/pipelines/deck/jobs", json={"items": []}), 400, "no items"),
            (post("/v1/pipelines/deck/jobs", json={"records": []}), 400, "not a job request"),
            (post("/v1/pipelines/deck/jobs", json={"items": [{}], "api_key": "sk-live-abcdefgh12345678"}), 400,
             "not a job request: api_key: Extra inputs are not permitted"),
            (post("/v1/pipelines/nope/jobs", json={"items": [1]}), 404, "unknown pipeline"),
            (post("/v1/pipelines/deck/jobs", content="a,b", headers={"content-type": "text/csv"}), 415, "multipart"),
            (post("/v1/pipelines/deck/jobs", files={"other": ("x.jsonl", b"{}")}), 400, "no `file` field"),
            (served.client.get("/v1/jobs/nothing"), 404, "no job 'nothing'"),
            (served.client.delete("/v1/jobs/nothing"), 404, "no job 'nothing'")):
        assert response.status_code == status, response.text
        assert message in response.json()["error"] and "sk-live" not in response.text     # never the value sent
    assert served.client.get("/v1/jobs").json() == []


def test_cancel_keeps_what_finished(served):
    served.model.script(json.dumps({"rating": "red", "score": 10}), contains="quick")
    original = served.model.complete

    async def complete(spec, messages, params):       # the second slide is never answered
        if "quick" not in str(messages):
            await asyncio.sleep(3600)
        return await original(spec, messages, params)
    served.model.complete = complete
    job = served.client.post("/v1/pipelines/deck/jobs", json={"items": [deck("<p>quick</p>", "<p>slow</p>")]}).json()
    wait(served.client, job["id"], ("running",))
    deadline = time.monotonic() + 30
    while served.client.get(f"/v1/jobs/{job['id']}").json()["counts"]["done"] < 1:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    cancelled = served.client.delete(f"/v1/jobs/{job['id']}")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    results = lines(served.client.get(f"/v1/jobs/{job['id']}/results"))
    assert [r["rating"] for r in results] == ["red"]
    summary = json.loads((served.root / cancelled.json()["run"] / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["total"] == 1
    again = served.client.delete(f"/v1/jobs/{job['id']}")
    assert again.status_code == 409 and "is cancelled" in again.json()["error"]


def test_a_stopped_server_resumes_its_jobs_without_asking_again(served_project, db_url):
    """Stopped mid-job (its lifespan ends), the server's next start takes the job up in the same
    run folder: results written before are kept as they are, no answered call is sent again."""
    model, gate = gated_model(2)
    slides = [f"<p>slide {n}</p>" for n in range(6)]
    with make_client(served_project.root, model, db_url) as client:
        job = client.post("/v1/pipelines/deck/jobs", json={"items": [deck(*slides)]}).json()
        two_results(client, job["id"])
        first_run = client.get(f"/v1/jobs/{job['id']}").json()["run"]
        answered = [r.prompt for r in model.requests[:2]]
    assert json.loads((served_project.root / "reports" / ".runner-serve" / "jobs" / f"{job['id']}.json")
                      .read_text())["status"] == "queued"
    gate["open"] = 100
    model.requests.clear()
    with make_client(served_project.root, model, db_url) as client:
        done = wait(client, job["id"])
        assert done["status"] == "succeeded" and done["run"] == first_run and done["resumed"] == 0
        assert done["counts"]["resumed"] == 2 and done["counts"]["judged"] == 4
        results = lines(client.get(f"/v1/jobs/{job['id']}/results"))
    assert len(results) == 6 and [r["index"] for r in results] == [1, 2, 3, 4, 5, 6]
    assert not set(answered) & {r.prompt for r in model.requests}
    assert (served_project.root / first_run / "summary.json").is_file()
    # calls.jsonl holds every item's call: those of the two results taken up again as the
    # first run wrote them (sent, not cached), then the rest's
    calls = list(read_calls(served_project.root / first_run / "calls.jsonl"))
    assert sorted(c["item"] for c in calls) == [1, 2, 3, 4, 5, 6]
    assert sorted(c["item"] for c in calls if not c["cached"]) == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("from_store", [False, True], ids=["judged", "from the store"])
def test_a_resumed_job_whose_other_calls_fail_ends_as_the_run_would(served_project, db_url, from_store):
    """Stopped after two slides were answered, the server is started again with the model failing
    every call: the job takes the two up again, its four other slides error, and it ends as
    `runner run` over the six slides ends with that model (two answered: exit 0, four errors),
    `succeeded`, not `failed` for want of a call answered since the restart. The same when the
    first run took its two results from the store (/judge had judged those slides): no call of
    that run answered them, yet a model's answer made them."""
    model, gate = gated_model(2)
    slides = [f"<p>slide {n}</p>" for n in range(6)]
    with make_client(served_project.root, model, db_url) as client:
        if from_store:
            judged = client.post("/v1/pipelines/deck/judge", json={"items": [deck(*slides[:2])]}).json()
            assert [r["source"] for r in judged["results"]] == ["judged", "judged"], judged
        job = client.post("/v1/pipelines/deck/jobs", json={"items": [deck(*slides)]}).json()
        two_results(client, job["id"])
        if from_store:
            assert client.get(f"/v1/jobs/{job['id']}").json()["counts"]["store"] == 2
    gate["open"] = 100
    model.script(server_error("model overloaded"))
    with make_client(served_project.root, model, db_url) as client:
        done = wait(client, job["id"])
    assert done["counts"]["resumed"] == 2 and done["counts"]["errors"] == 4, done
    assert done["status"] == "succeeded" and done["error"] is None, done


def test_a_resumed_job_measures_its_jurors_over_every_item(served_project, db_url):
    """Stopped after two slides' juries answered, then taken up again: the run's agreement covers
    the two results it took up (their votes kept in the run folder's votes.jsonl) as well as the
    four it judged, as the uninterrupted job's would."""
    served_project.pipeline(JURY_DECK.replace("models:\n", "concurrency: 1\nmodels:\n", 1), "jdeck.yaml")
    model, gate = gated_model(4)                # two slides, two jurors each
    slides = [f"<p>slide {n}</p>" for n in range(6)]
    with make_client(served_project.root, model, db_url) as client:
        job = client.post("/v1/pipelines/jdeck/jobs", json={"items": [deck(*slides)]}).json()
        two_results(client, job["id"])
    gate["open"] = 100
    with make_client(served_project.root, model, db_url) as client:
        done = wait(client, job["id"])
    assert done["counts"]["resumed"] == 2 and done["counts"]["judged"] == 4, done
    juries = json.loads((served_project.root / done["run"] / "summary.json").read_text())["juries"]
    assert juries["ask"]["items"] == 6, juries


@pytest.mark.parametrize("edit", ["a note in results.jsonl", "odd votes"])
def test_a_resumed_job_reads_hand_edited_notes_as_data(served_project, db_url, edit):
    """A results line carrying its own `runner:votes` (not in votes.jsonl) ended the resumed
    job in `internal error: TypeError`; an odd votes line is taken as votes, never shown."""
    served_project.pipeline(JURY_DECK.replace("models:\n", "concurrency: 1\nmodels:\n", 1), "jdeck.yaml")
    model, gate = gated_model(4)
    slides = [f"<p>slide {n}</p>" for n in range(6)]
    with make_client(served_project.root, model, db_url) as client:
        job = client.post("/v1/pipelines/jdeck/jobs", json={"items": [deck(*slides)]}).json()
        two_results(client, job["id"])
        run = served_project.root / client.get(f"/v1/jobs/{job['id']}").json()["run"]
    if edit == "a note in results.jsonl":
        first, *rest = (run / "results.jsonl").read_text().splitlines()
        (run / "results.jsonl").write_text("\n".join([json.dumps({**json.loads(first), "runner:votes": 5}), *rest]) + "\n")
        (run / "votes.jsonl").write_text("")
    else:
        (run / "votes.jsonl").write_text('{"index": 1, "votes": [["ask", false, {"a": [1, {"b": 2}], "c": null}]]}\n')
    gate["open"] = 100
    with make_client(served_project.root, model, db_url) as client:
        done = wait(client, job["id"])
        assert "runner:votes" not in client.get(f"/v1/jobs/{job['id']}/results").text
    assert done["status"] == "succeeded" and done["counts"]["resumed"] == 2, done


def two_results(client, job_id: str) -> None:
    """Wait until the job's run has written two results (its server may then be stopped)."""
    deadline = time.monotonic() + 30
    while len(lines(client.get(f"/v1/jobs/{job_id}/results"))) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_a_job_item_whose_call_failed_is_never_stored_even_when_its_step_carries_on(served_project, db_url):
    """A step with on_error: continue turns a failed call into a result without `error`: the
    job's run counts it as its one error and the store never keeps it, so the next request
    judges it again."""
    served_project.pipeline(DECK_JUDGE.replace("name: deck", "name: tolerant")
                            .replace("    uses: llm\n", "    uses: llm\n    on_error: continue\n")
                            .replace("steps.ask.output.rating }}", "steps.ask.output.rating | default('none') }}")
                            .replace("steps.ask.output.score }}", "steps.ask.output.score | default(0) }}"),
                            "tolerant.yaml")
    model = scripted_model(json.dumps({"rating": "green", "score": 90}))
    model.script(server_error("model overloaded"), repeat_last=False)       # one failed answer, then answers
    with make_client(served_project.root, model, db_url) as client:
        job = client.post("/v1/pipelines/tolerant/jobs", json={"items": [deck("<p>A</p>")]}).json()
        done = wait(client, job["id"])
        assert done["status"] == "failed" and done["counts"]["errors"] == 1, done     # its one item errored
        assert [r["rating"] for r in lines(client.get(f"/v1/jobs/{job['id']}/results"))] == ["none"]
        again = client.post("/v1/pipelines/tolerant/judge", json={"items": [deck("<p>A</p>")]}).json()
        assert [r["source"] for r in again["results"]] == ["judged"]


def noting_flights(monkeypatch) -> list[object]:
    """The keys of serve's computations as each caller enters them (the caller is in the flight
    when it returns to the loop): a test waits on it to know an item joined another's."""
    from runner.serve.judging import SingleFlight
    asked: list[object] = []
    original = SingleFlight.run

    async def noted(self, key, compute):
        asked.append(key)
        return await original(self, key, compute)
    monkeypatch.setattr(SingleFlight, "run", noted)
    return asked


def test_a_job_item_that_joined_a_failed_judgment_is_judged_and_counted_by_its_own_run(served_project, db_url,
                                                                                       monkeypatch):
    """A job's item asked for while a /judge request judges the same content joins that
    computation; when it failed (here a call `on_error: continue` let pass, so the result has
    no `error`), the job's run judges the item itself: its calls.jsonl holds the call and its
    summary counts the error, as `runner run` would (one rule: runner/engine/health.item_end)."""
    import httpx

    from runner.serve.app import create_app
    from runner.serve.judging import Settings
    served_project.pipeline(DECK_JUDGE.replace("name: deck", "name: tolerant")
                            .replace("    uses: llm\n", "    uses: llm\n    on_error: continue\n")
                            .replace("steps.ask.output.rating }}", "steps.ask.output.rating | default('none') }}")
                            .replace("steps.ask.output.score }}", "steps.ask.output.score | default(0) }}"),
                            "tolerant.yaml")
    asked = noting_flights(monkeypatch)
    model = scripted_model(json.dumps({"rating": "green", "score": 90}))
    model.script(server_error("model overloaded"))          # every call fails
    root = served_project.root
    app = create_app(Settings(root=root, cache_dir=root / "cache", transport=model), root / "pipelines", db_url)

    async def scenario() -> tuple[dict, dict]:
        async with app.router.lifespan_context(app), httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
            model.hold()
            judged = asyncio.ensure_future(client.post("/v1/pipelines/tolerant/judge", json={"item": deck("<p>A</p>")}))
            while model.in_flight < 1:
                await asyncio.sleep(0.01)
            job = (await client.post("/v1/pipelines/tolerant/jobs", json={"items": [deck("<p>A</p>")]})).json()
            while len(asked) < 2:                # the job's item joined the request's computation
                await asyncio.sleep(0.01)
            model.release()
            answer = (await judged).json()
            while (done := (await client.get(f"/v1/jobs/{job['id']}")).json())["status"] not in DONE:
                await asyncio.sleep(0.02)
            return answer, done

    answer, done = asyncio.run(scenario())
    assert answer["results"][0]["source"] == "error" and answer["counts"]["errors"] == 1
    assert done["status"] == "failed" and done["counts"]["errors"] == 1, done
    assert [c["item"] for c in read_calls(root / done["run"] / "calls.jsonl")] == [1]
    assert json.loads((root / done["run"] / "summary.json").read_text())["errors"] == 1


JURY_DECK = DECK_JUDGE.replace("name: deck", "name: jdeck").replace(
    "  judge: {model: openai/scripted, retries: 0}\n",
    "  a: {model: openai/scripted, retries: 0}\n  b: {model: openai/scripted, retries: 0, temperature: 0.5}\n").replace(
    "  - id: ask\n    uses: llm\n    with:\n      model: judge\n",
    "  - id: ask\n    uses: jury\n    with:\n      models: [a, b]\n      vote: {field: rating}\n").replace(
    "steps.ask.output.rating", "steps.ask.rating").replace("steps.ask.output.score", "0")


def test_two_identical_jobs_at_once_end_alike(served_project, db_url, monkeypatch):
    """Two jury jobs of the same slides at once, one slide answered and one whose calls fail,
    then a third: the second job's answered slide joins the first's computation (no call of its
    own), the third's comes from the store, yet a model's answer made it, so each job ends as
    `runner run` over those slides would: `succeeded` with one error (not the second `failed`,
    'no model answered any call'), its jurors measured over the same items (the joining job's
    agreement was null)."""
    import httpx

    from runner.serve.app import create_app
    from runner.serve.judging import Settings
    served_project.pipeline(JURY_DECK, "jdeck.yaml")
    asked = noting_flights(monkeypatch)
    model = scripted_model(json.dumps({"rating": "green", "score": 90}))
    model.script(server_error("model overloaded"), contains="bad")
    root = served_project.root
    app = create_app(Settings(root=root, cache_dir=root / "cache", transport=model), root / "pipelines", db_url)
    items = {"items": [deck("<p>A</p>", "<p>bad B</p>")]}

    async def finished(client: httpx.AsyncClient, job: dict) -> dict:
        while (view := (await client.get(f"/v1/jobs/{job['id']}")).json())["status"] not in DONE:
            await asyncio.sleep(0.02)
        return view

    async def scenario() -> list[dict]:
        async with app.router.lifespan_context(app), httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
            model.hold()
            first = (await client.post("/v1/pipelines/jdeck/jobs", json=items)).json()
            while model.in_flight < 4:
                await asyncio.sleep(0.01)
            second = (await client.post("/v1/pipelines/jdeck/jobs", json=items)).json()
            while len(asked) < 4:                # the second job's slides joined the first's computations
                await asyncio.sleep(0.01)
            model.release()
            done = [await finished(client, first), await finished(client, second)]
            third = (await client.post("/v1/pipelines/jdeck/jobs", json=items)).json()
            return [*done, await finished(client, third)]

    done = asyncio.run(scenario())
    for view in done:
        assert view["counts"]["errors"] == 1 and view["counts"]["done"] == 2, view
        assert view["status"] == "succeeded" and view["error"] is None, view
    juries = [json.loads((root / view["run"] / "summary.json").read_text()).get("juries") for view in done]
    assert juries[0]["ask"]["items"] == 2 and juries[0] == juries[1] == juries[2], juries


def test_a_result_stored_from_a_memo_hit_keeps_the_model_answer_behind_it(served_project, tmp_path):
    """A job's item from the memo store (a model's answer made it, in a run the result store
    does not know: another store) is stored with that note: a later job taking it from the
    store, beside an item whose call fails, counts it as an answer and succeeds, as
    `runner run` over those items would."""
    root = served_project.root
    served_project.pipeline(DECK_JUDGE.replace("name: deck", "name: memodeck").replace(
        "steps:\n", f'memo: {{key: "{{{{ item.html }}}}", store: "{root}/memo.json"}}\nsteps:\n', 1), "memodeck.yaml")
    model = scripted_model(json.dumps({"rating": "green", "score": 90}))
    model.script(server_error("model overloaded"), contains="bad")
    with make_client(root, model, str(tmp_path / "first.sqlite")) as client:      # judged, kept by the memo
        assert wait(client, client.post("/v1/pipelines/memodeck/jobs", json={"items": [deck("<p>A</p>")]}
                                        ).json()["id"])["status"] == "succeeded"
    with make_client(root, model, str(tmp_path / "second.sqlite")) as client:
        job = client.post("/v1/pipelines/memodeck/jobs", json={"items": [deck("<p>A</p>"), deck("<p>Z</p>")]}).json()
        done = wait(client, job["id"])
        assert done["counts"]["memo"] == 1 and done["status"] == "succeeded", done
        for suffix in ("", "-wal", "-shm"):         # the memo store gone: slide A is the result store's alone
            (root / f"memo.sqlite{suffix}").unlink(missing_ok=True)
        model.requests.clear()
        job = client.post("/v1/pipelines/memodeck/jobs", json={"items": [deck("<p>A</p>", "<p>bad B</p>")]}).json()
        done = wait(client, job["id"])
    assert [r.prompt for r in model.requests if "<p>A</p>" in r.prompt] == [], done     # not asked: stored
    assert done["counts"]["judged"] == 0 and done["counts"]["errors"] == 1, done
    assert done["status"] == "succeeded" and done["error"] is None, done


def test_a_job_fails_as_runner_run_fails_when_no_model_answered_any_call(served):
    """A job ends as `runner run` over its items ends (engine/health.run_failure, the one rule):
    an item from the store that a model's answer made counts as an answer from the cache does
    (`runner run` would have it answered, by the model or its cache), so a job of a stored item
    and an item whose call failed succeeds with one error; a job whose every call failed and
    that got no answer anywhere is `failed`, as `runner run` exits 3 on such a run."""
    served.judge(deck("<p>A</p>"))
    served.model.script(server_error("model overloaded"), contains="bad")
    job = served.client.post("/v1/pipelines/deck/jobs", json={"items": [deck("<p>A</p>", "<p>bad B</p>")]}).json()
    done = wait(served.client, job["id"])
    assert done["counts"]["store"] == 1 and done["counts"]["errors"] == 1, done
    assert done["status"] == "succeeded" and done["error"] is None, done
    job = served.client.post("/v1/pipelines/deck/jobs", json={"items": [deck("<p>bad C</p>")]}).json()
    done = wait(served.client, job["id"])
    assert done["status"] == "failed" and "model overloaded" in done["error"], done


def test_a_job_record_edited_into_a_wrong_shape_is_left_alone_with_a_message(served_project, db_url, capsys):
    """A job file whose params is not an object (or counts, or input_name, not what a server
    writes) is refused when the server starts, with its
    path and what is wrong, and the server goes on (it was an internal error when it ran)."""
    jobs = served_project.root / "reports" / ".runner-serve" / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    (jobs / "20260101000000-bad.json").write_text(json.dumps(
        {"id": "20260101000000-bad", "pipeline": "deck", "params": ["x"], "input": "in.jsonl",
         "status": "queued"}), encoding="utf-8")
    (jobs / "20260101000000-few.json").write_text(json.dumps(
        {"id": "20260101000000-few", "pipeline": "deck", "params": {}, "input": "in.jsonl",
         "status": "succeeded", "counts": {}}), encoding="utf-8")
    (jobs / "20260101000000-num.json").write_text(json.dumps(
        {"id": "20260101000000-num", "pipeline": "deck", "params": {}, "input": "in.jsonl",
         "input_name": 5, "status": "queued"}), encoding="utf-8")
    with make_client(served_project.root, scripted_model("{}"), db_url) as client:
        assert client.get("/v1/jobs/20260101000000-bad").status_code == 404
        assert client.get("/v1/jobs/20260101000000-few").status_code == 404
        assert client.get("/v1/jobs/20260101000000-num").status_code == 404
        assert client.get("/v1/jobs").status_code == 200
    err = capsys.readouterr().err
    assert "20260101000000-bad.json: not a job record (params is not a JSON object): left alone" in err
    assert "20260101000000-num.json: not a job record (input_name is not a string): left alone" in err
    assert "20260101000000-few.json: not a job record (counts does not hold a whole number for each of done," in err



def test_a_jobs_results_stream_never_sends_the_tail_of_a_line_finished_meanwhile(tmp_path, monkeypatch):
    """A results.jsonl another process appends to (a job of another server of the project, or
    a `runner run`) may end in a line still being written. The stream stops before it: read on,
    the next read returned only that line's tail (the writer's second write, landing just after
    the reader met the end), which ends in a newline and was sent as a line."""
    import io

    from runner.serve.job_files import results_lines
    first = json.dumps({"index": 1, "verdict": "yes"}).encode() + b"\n"
    second = json.dumps({"index": 2, "verdict": "no"}).encode() + b"\n"
    results = tmp_path / "results.jsonl"
    results.write_bytes(first + second[:10])

    class Appended(io.FileIO):
        """The file as the reader sees it while the writer finishes its line right after the reader's first end."""
        def readinto(self, buffer):  # type: ignore[no-untyped-def]
            read = super().readinto(buffer)
            if read == 0 and not results.read_bytes().endswith(b"\n"):
                with open(results, "ab") as writer:
                    writer.write(second[10:])
            return read

    real_open = Path.open
    monkeypatch.setattr(Path, "open", lambda self, mode="r", *a, **k: io.BufferedReader(Appended(self))
                        if self == results and mode == "rb" else real_open(self, mode, *a, **k))

    async def stream() -> bytes:
        return b"".join([chunk async for chunk in results_lines(results)])

    assert asyncio.run(stream()) == first


def test_a_job_is_judged_with_the_servers_set_and_model_as_judge_is(served_project, db_url):
    """`runner serve --set params.green_at=70`: a job's run loaded the pipeline file again with the
    request's params only, so it judged at 80 and kept its results under the hash of 70, which
    /judge then served from the store."""
    model = scripted_model(json.dumps({"rating": "green", "score": 90}))
    from fastapi.testclient import TestClient

    from runner.serve.app import create_app
    from runner.serve.judging import Settings
    root = served_project.root
    app = create_app(Settings(root=root, cache_dir=root / "cache", transport=model), root / "pipelines", db_url,
                     overrides=["params.green_at=70"])
    with TestClient(app) as client:
        judged = client.post("/v1/pipelines/deck/judge", json={"item": deck("<p>A</p>")}).json()
        job = client.post("/v1/pipelines/deck/jobs", json={"items": [deck("<p>B</p>")]}).json()
        done = wait(client, job["id"])
    assert [request.prompt.rsplit(". ", 1)[-1] for request in model.requests] == ["Green at 70."] * 2
    assert done["status"] == "succeeded" and done["pipeline_hash"] == judged["pipeline_hash"]
    manifest = json.loads((root / done["run"] / "run.json").read_text())
    assert manifest["pipeline"]["sets"] == ["params.green_at=70"]
    assert manifest["pipeline"]["resolved"]["params"]["green_at"] == 70
