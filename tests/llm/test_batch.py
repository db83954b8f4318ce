"""Provider batch APIs (issue 28): calls gathered per model while items wait, submitted to
the fake server's /v1/files and /v1/batches, polled, resumed; the same cache as live calls."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from fakellm import Reply
from helpers import run, write_json

pytestmark = pytest.mark.slow

SCHEMA = {"type": "object", "required": ["verdict"],
          "properties": {"verdict": {"enum": ["yes", "no"]}, "reason": {"type": "string"}}}
POLL = "batch_poll_seconds: 0.02"


def batch_pipeline(project, *, extra="", models=("m",), retries=1):
    project.schema("answer.schema.json", SCHEMA)
    project.prompt("ask.j2", "Question {{ item.q }}\n")
    project.prompt("again.j2", "Second look at {{ item.q }}: first said {{ steps.ask.output.verdict }}\n")
    entries = "".join(f"""
          {name}:
            model: openai/{name}-model
            api_base: "{{{{ env.FAKE_URL }}}}"
            backoff: 0.01
            retries: {retries}
            {POLL}
            {extra}""" for name in models)
    return project.pipeline(f"""
        version: 1
        name: batcht
        env: [FAKE_URL]
        models:{entries}
        steps:
          - id: ask
            uses: llm
            with: {{model: {models[0]}, prompt: ask.j2, output_schema: answer.schema.json}}
          - id: again
            uses: llm
            with: {{model: {models[0]}, prompt: again.j2, output_schema: answer.schema.json}}
        output:
          verdict: "{{{{ steps.ask.output.verdict | default(none) }}}}"
          second: "{{{{ steps.again.output.verdict | default(none) }}}}"
          cached: "{{{{ steps.ask.cached | default(none) }}}}"
        """)


@pytest.fixture
def env(fake_llm, monkeypatch):
    monkeypatch.setenv("FAKE_URL", fake_llm.url)
    return fake_llm


def items(project, count):
    return write_json(project.root / "in.json", [{"q": f"q{i}"} for i in range(count)])


def test_two_stages_become_two_batches_and_a_rerun_sends_nothing(project, env):
    env.answer_json({"verdict": "no"}, contains="Second look")
    env.answer_json({"verdict": "yes"}, contains="Question")
    path = batch_pipeline(project)
    outcome = run(path, items(project, 12), batch=True)
    assert [(r["verdict"], r["second"]) for r in outcome.results] == [("yes", "no")] * 12
    assert env.requests == []                                   # no live chat request
    batches = env.batches.created()
    assert [len(b.lines) for b in batches] == [12, 12]          # stage one, then stage two
    assert all(b.status == "completed" for b in batches)
    assert env.batches.uploads[0]["purpose"] == "batch"
    summary = outcome.summary
    assert summary["models"]["m"]["calls"] == 24
    assert summary["batches"]["m"]["batches"] == 2 and summary["batches"]["m"]["requests"] == 24
    # The same cache as live calls: a live rerun (no --batch needed either) sends nothing.
    env.batches.reset()
    again = run(path, items(project, 12), out="out2")
    assert [r["cached"] for r in again.results] == [True] * 12
    assert env.requests == [] and env.batches.created() == []
    rerun = run(path, items(project, 12), batch=True, out="out3")
    assert [r["cached"] for r in rerun.results] == [True] * 12
    assert env.requests == [] and env.batches.created() == [] and env.batches.uploads == []


def test_batch_and_live_answers_share_cache_keys(project, env):
    env.answer_json({"verdict": "yes"})
    path = batch_pipeline(project)
    live = run(path, items(project, 3))
    assert len(env.requests) == 6 and env.batches.created() == []
    env.reset()
    batched = run(path, items(project, 3), batch=True, out="out2")
    assert [r["cached"] for r in batched.results] == [True] * 3
    assert env.batches.created() == [] and env.requests == []
    assert [r["verdict"] for r in batched.results] == [r["verdict"] for r in live.results]


def test_an_error_line_is_retried_in_the_next_batch_then_recorded(project, env):
    env.script(Reply(status=500), Reply(json.dumps({"verdict": "no"})), contains="Question q1", repeat_last=True)
    env.script(Reply(status=500), contains="Question q2")        # fails every time
    env.answer_json({"verdict": "yes"})
    path = batch_pipeline(project, retries=1)
    outcome = run(path, items(project, 3), batch=True)
    by_q = {r["index"]: r for r in outcome.results}
    assert by_q[1]["verdict"] == "yes"
    assert by_q[2]["verdict"] == "no"                              # answered by the retry round
    assert by_q[3].get("verdict") is None and "HTTP 500" in by_q[3]["error"]
    assert env.requests == []
    batches = env.batches.created()
    prompts = [[line["body"]["messages"][-1]["content"] for line in b.lines] for b in batches]
    # Stage one; then its two error lines again, gathered with item 1's second stage.
    assert sorted(prompts[1]) == ["Question q1\n", "Question q2\n", "Second look at q0: first said yes\n"]
    assert sum(len(p) for p in prompts) == 3 + 2 + 2
    assert outcome.summary["models"]["m"]["retries"] == 2


def test_batch_retry_live_sends_only_the_failed_line_live(project, env):
    env.script(Reply(status=500), Reply(json.dumps({"verdict": "no"})), contains="Question q1")
    env.answer_json({"verdict": "yes"})
    path = batch_pipeline(project, extra="batch_retry: live")
    outcome = run(path, items(project, 3), batch=True)
    assert [r["verdict"] for r in outcome.results] == ["yes", "no", "yes"]
    assert [r.prompt for r in env.requests] == ["Question q1\n"]           # the declared live retry only
    assert outcome.summary["batches"]["m"]["live_retries"] == 1


@pytest.mark.parametrize("ending", ["expired", "cancelled", "failed"])
def test_a_batch_that_does_not_complete_is_reported_and_its_calls_retried_or_failed(project, env, ending, capsys):
    env.batches.outcomes = [ending]
    env.answer_json({"verdict": "yes"})
    path = batch_pipeline(project, retries=1)
    outcome = run(path, items(project, 2), batch=True)
    problems = outcome.summary["batches"]["m"]["problems"]
    assert len(problems) == 1 and ending in problems[0]
    assert ending in capsys.readouterr().err
    if ending == "expired":                     # retried in a new batch, which completes
        assert [r["verdict"] for r in outcome.results] == ["yes", "yes"]
    else:                                       # refused or cancelled: the calls fail, with the reason
        assert all(ending in r["error"] for r in outcome.results)
        message = "scripted failure" if ending == "failed" else "cancelled"
        assert all(message in r["error"] for r in outcome.results)


def test_polls_come_soon_then_back_off_to_batch_poll_seconds():
    """Issue 50, B5: a small batch is not 30 s a round: the first poll after 2 s, each pause
    twice the last, up to batch_poll_seconds."""
    from itertools import islice

    from runner.llm.batch.polling import poll_pauses
    assert list(islice(poll_pauses(30.0), 7)) == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert list(islice(poll_pauses(0.02), 3)) == [0.02, 0.02, 0.02]
    assert list(islice(poll_pauses(600.0), 10))[-1] == 600.0


def test_no_batch_api_on_the_endpoint_fails_the_calls_with_a_clear_message(project, env):
    env.batches.enabled = False
    path = batch_pipeline(project, retries=0)
    outcome = run(path, items(project, 1), batch=True)
    assert "/v1/files and /v1/batches" in outcome.results[0]["error"]


def test_a_batch_the_endpoint_never_took_sends_no_call(project, monkeypatch):
    """An unreachable endpoint: each round's upload failed, yet every round counted its calls as
    sent (7 calls read `28 sent`, where a live run of them says `0 sent`)."""
    monkeypatch.setenv("FAKE_URL", "http://127.0.0.1:9/v1")         # nothing listens there
    path = batch_pipeline(project, retries=2)
    outcome = run(path, items(project, 2), batch=True)
    models = outcome.summary["models"]["m"]
    assert (models["calls"], models["failures"]) == (0, 2), models
    assert all("uploading the batch file" in r["error"] for r in outcome.results)
    # the hint a live run gives of a refused endpoint, not "every call to m ... failed"
    assert outcome.summary["hints"] == [
        "m unreachable (uploading the batch file: connection refused): start a model server there (LM Studio, Ollama, "
        "llama.cpp), point it elsewhere with --set models.m.api_base=URL, or set the provider's API key."]


def test_summary_costs_use_the_batch_price(project, env):
    env.answer_json({"verdict": "yes"})
    path = batch_pipeline(project, models=("m",))
    paid = ["models.m.model=openai/gpt-4o-mini"]
    batched = run(path, items(project, 40), batch=True, overrides=paid)
    live = run(path, items(project, 40), overrides=paid, cache_dir=project.root / "live-cache", out="live")
    batch_cost, live_cost = batched.summary["models"]["m"]["cost"], live.summary["models"]["m"]["cost"]
    # gpt-4o-mini: litellm's table lists its batch price, half the live one; 80 calls of 10 + 5 tokens
    assert live_cost == round(80 * (10 * 1.5e-07 + 5 * 6e-07), 6)
    assert batch_cost == round(80 * (10 * 7.5e-08 + 5 * 3e-07), 6) == round(live_cost / 2, 6)
    assert batched.summary["batches"]["m"]["cost_basis"] == "batch price from litellm's table"


def test_a_price_without_a_batch_entry_is_estimated_at_half():
    from runner.llm.client.prices import batch_price_of, price_of
    live = price_of("gpt-3.5-turbo")
    assert batch_price_of("gpt-3.5-turbo") == (type(live)(live.input_per_token / 2, live.output_per_token / 2), False)
    assert batch_price_of("openai/gpt-4o-mini")[1] is True
    assert batch_price_of("openai/local-model") is None


def test_render_estimates_the_batch_price(project, env, cli):
    path = batch_pipeline(project)
    write_json(project.root / "in.json", [{"q": f"q{n}"} for n in range(50)])

    def estimate(*extra):
        done = cli("render", str(path), "--input", "in.json", "--set", "models.m.model=openai/gpt-4o-mini",
                   "--set", "models.m.max_tokens=1000", *extra)
        assert done.exit_code == 0, done.output
        return next(x for x in done.stdout.splitlines() if x.startswith("  m (openai/gpt-4o-mini)"))
    live, flagged, field = estimate(), estimate("--batch"), estimate("--set", "models.m.batch=true")
    assert live.endswith("est. cost $0.0300 for the 50 uncached call(s)")        # 50 x 1000 x 6e-07, and the prompts
    assert flagged.endswith("est. cost $0.0150 for the 50 uncached call(s) at the batch price") and field == flagged
    assert env.requests == [] and env.batches.created() == []


@pytest.mark.xdist_group("litellm")      # litellm imported by one worker only
def test_a_model_without_a_batch_api_stays_live_said_once(project, env, capsys):
    env.answer_json({"verdict": "yes"})
    path = batch_pipeline(project, extra="transport: litellm")
    outcome = run(path, items(project, 2), batch=True, overrides=["models.m.transport=http"])
    assert env.batches.created() and env.requests == []       # http: batched
    env.reset()
    env.answer_json({"verdict": "yes"})
    monkeyed = run(path, items(project, 2), batch=True, cache_dir=project.root / "c2", out="o2",
                   overrides=["models.m.transport=litellm", "models.m.api_key=sk-fake-key-123"])
    assert [r["verdict"] for r in monkeyed.results] == ["yes", "yes"]
    assert env.batches.created() == [] and len(env.requests) == 4
    assert capsys.readouterr().err.count("has no batch API runner can use") == 1
    assert outcome.results


def test_a_format_the_endpoint_refuses_falls_back_in_the_next_batch(project, env):
    env.personality = "llama-cpp-python"        # refuses json_schema with a 500, takes json_object
    env.answer_json({"verdict": "yes"})
    path = batch_pipeline(project, retries=0)
    outcome = run(path, items(project, 3), batch=True)
    assert [r["verdict"] for r in outcome.results] == ["yes"] * 3
    kinds = [{line["body"]["response_format"]["type"] for line in b.lines} for b in env.batches.created()]
    assert kinds[:2] == [{"json_schema"}, {"json_object"}]
    assert env.requests == []


def test_a_format_learned_in_a_batch_is_the_one_live_calls_of_that_schema_start_with(project, env):
    env.personality = "llama-cpp-python"        # refuses json_schema with a 500, takes json_object
    env.answer_json({"verdict": "yes"})
    path = batch_pipeline(project, retries=0)
    run(path, items(project, 2), batch=True)
    run(path, write_json(project.root / "more.json", [{"q": "new"}]))          # live: no --batch
    assert [r.body["response_format"]["type"] for r in env.requests][:1] == ["json_object"]


REFUSAL = Reply(status=400, raw_body=json.dumps({"error": "response_format json_schema is not supported"}))


def live_and_batched(project, env, path, *replies):
    """The verdicts and errors of one item asked live, then batched, the server answering `replies` in turn."""
    outcomes = []
    for batch in (False, True):
        env.reset()
        env.script(*replies, contains="Question")
        env.answer_json({"verdict": "no"})
        where = "batched" if batch else "live"
        outcome = run(path, items(project, 1), batch=batch, out=where, cache_dir=project.root / where)
        outcomes.append([(r.get("verdict"), r.get("error")) for r in outcome.results])
    return outcomes


def test_a_refused_format_is_asked_anew_with_its_retries_live_and_batched(project, env):
    # One retry: used by the first 500; the format falls back and the next format gets its own retry.
    path = batch_pipeline(project, retries=1)
    live, batched = live_and_batched(project, env, path, Reply(status=500), REFUSAL, Reply(status=500),
                                     Reply(json.dumps({"verdict": "yes"})))
    assert live == batched == [("yes", None)]


def test_an_error_naming_a_format_none_was_sent_for_is_an_ordinary_error_live_and_batched(project, env):
    # structured_output none sends no response_format: an error naming one is not a refusal of it.
    path = batch_pipeline(project, retries=1, extra="structured_output: none")
    live, batched = live_and_batched(project, env, path, Reply(status=500, raw_body=REFUSAL.raw_body),
                                     Reply(json.dumps({"verdict": "yes"})))
    assert live == batched == [("yes", None)]


def test_runner_batches_lists_and_cancels_pending_batches(project, env, cli):
    env.batches.hold = True
    env.answer_json({"verdict": "yes"})
    path = batch_pipeline(project, extra="batch_max_wait: 0")
    cache = project.root / "cache"
    first = cli("batches", "--cache-dir", str(cache))
    assert first.exit_code == 0 and "no batches" in first.stdout

    def batches_command(*extra):        # another process, as a user in a second shell
        return subprocess.run([sys.executable, "-m", "runner.cli.app", "batches", "--cache-dir", str(cache), *extra],
                              capture_output=True, text=True, timeout=60)

    def inspect_then_cancel():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not env.batches.created():
            time.sleep(0.02)
        while time.monotonic() < deadline and env.batches.created()[0].polls < 2:
            time.sleep(0.02)
        listing.append(batches_command())
        cancelled.append(batches_command("--cancel"))
    listing: list = []
    cancelled: list = []
    helper = threading.Thread(target=inspect_then_cancel)
    helper.start()
    outcome = run(path, items(project, 2), batch=True)
    helper.join()
    batch_id = env.batches.created()[0].id
    assert f"{batch_id}: model m (openai/m-model) at {env.url}: in_progress, 2 request(s)" in listing[0].stdout
    assert cancelled[0].returncode == 0 and f"{batch_id}: cancelling" in cancelled[0].stdout
    assert all("cancelled" in r["error"] for r in outcome.results)        # the run saw its batch cancelled
    assert "no pending batches" in cli("batches", "--cache-dir", str(cache)).stdout


def test_progress_shows_each_batch_with_its_state_and_counts(project, env):
    import io

    from runner.engine.progress import PlainLines
    env.answer_json({"verdict": "yes"})
    env.batches.hold = True
    path = batch_pipeline(project)
    stream = io.StringIO()

    def release_when_seen():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "in_progress" not in stream.getvalue():
            time.sleep(0.02)
        env.batches.hold = False
    helper = threading.Thread(target=release_when_seen)
    helper.start()
    run(path, items(project, 3), batch=True, progress=PlainLines(stream, interval=0.02))
    helper.join()
    assert "LLM calls 3 sent, 0 cached, 0 failed; batches: m in_progress 0/3" in stream.getvalue()


def test_a_gateway_answering_nonsense_fails_the_calls_instead_of_hanging(project, env, monkeypatch):
    monkeypatch.setattr(type(env.batches), "_create", lambda self, body: (200, json.dumps({"object": "batch"})))
    path = batch_pipeline(project, retries=0)
    outcome = run(path, items(project, 2), batch=True)
    assert all("batch handling failed: KeyError" in r["error"] for r in outcome.results)



def test_a_refused_submission_is_retried_after_the_backoff(project, env):
    env.batches.refusals = [429]
    env.answer_json({"verdict": "yes"})
    path = batch_pipeline(project, retries=1)
    outcome = run(path, items(project, 2), batch=True)
    assert [r["verdict"] for r in outcome.results] == ["yes", "yes"]
    assert len(env.batches.uploads) == 2 + 1          # stage one twice (refused, then taken), stage two once
    assert [len(b.lines) for b in env.batches.created()] == [2, 2]
    assert outcome.summary["models"]["m"]["retries"] == 2


def test_a_refused_submission_out_of_retries_fails_its_calls_with_the_providers_message(project, env):
    env.batches.refusals = [429]
    path = batch_pipeline(project, retries=0)
    outcome = run(path, items(project, 1), batch=True)
    assert "Enqueued token limit reached" in outcome.results[0]["error"]
    assert env.batches.created() == []
    with sqlite3.connect(project.root / "cache" / "batches.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM batches").fetchone() == (0,)    # nothing left to poll


def test_failed_polls_are_polled_again(project, env):
    env.batches.failing_polls = 3
    env.answer_json({"verdict": "yes"})
    path = batch_pipeline(project, retries=0)
    outcome = run(path, items(project, 2), batch=True)
    assert [r["verdict"] for r in outcome.results] == ["yes", "yes"]
    assert len(env.batches.created()) == 2 and env.batches.failing_polls == 0


def test_the_fake_fails_a_file_that_mixes_models_with_its_errors(env):
    """The fake's Batch API as a client sees it: multipart upload, create, the status sequence."""
    import asyncio

    from runner.llm.batch.client import BatchClient, RequestLine
    from runner.llm.client.spec import build_spec

    async def submit(models):
        client = BatchClient(build_spec("m", {"model": "openai/a", "api_base": env.url}))
        try:
            data = b"".join(RequestLine(f"c{i}", {"model": m, "messages": [{"role": "user", "content": "hi"}]})
                            .encoded() for i, m in enumerate(models))
            batch = await client.create(await client.upload(data), "sub-1")
            statuses = [batch["status"]]
            while statuses[-1] not in ("completed", "failed"):
                statuses.append((await client.retrieve(batch["id"]))["status"])
            final = await client.retrieve(batch["id"])
            output = await client.content(final["output_file_id"]) if final["output_file_id"] else b""
            return statuses, final, output
        finally:
            await client.aclose()
    statuses, final, _ = asyncio.run(submit(["a", "b"]))
    assert statuses == ["validating", "failed"] and final["output_file_id"] is None
    assert "more than one model (a, b)" in final["errors"]["data"][0]["message"]
    env.answer_json({"verdict": "yes"}, model="a")
    statuses, final, output = asyncio.run(submit(["a", "a"]))
    assert statuses == ["validating", "in_progress", "finalizing", "completed"]
    lines = [json.loads(line) for line in output.splitlines()]
    assert [(x["custom_id"], x["response"]["status_code"]) for x in lines] == [("c0", 200), ("c1", 200)]
    assert json.loads(lines[0]["response"]["body"]["choices"][0]["message"]["content"]) == {"verdict": "yes"}
    assert final["request_counts"] == {"total": 2, "completed": 2, "failed": 0}
    assert env.requests == [] and len(env.batches.requests) == 2


def test_the_same_call_from_several_items_is_one_line(project, env):
    """A batch file takes each custom_id once: items asking the very same thing share a line."""
    env.answer_json({"verdict": "yes"})
    path = batch_pipeline(project)
    source = write_json(project.root / "same.json", [{"q": "same"}] * 5 + [{"q": "other"}])
    outcome = run(path, source, batch=True)
    assert [r["verdict"] for r in outcome.results] == ["yes"] * 6
    assert [len(b.lines) for b in env.batches.created()] == [2, 2]


def test_a_model_field_batch_true_batches_that_juror_only(project, env):
    project.schema("answer.schema.json", SCHEMA)
    project.prompt("ask.j2", "Question {{ item.q }}\n")
    path = project.pipeline("""
        version: 1
        name: mixed
        env: [FAKE_URL]
        models:
          slow: {model: openai/slow-model, api_base: "{{ env.FAKE_URL }}", batch: true, batch_poll_seconds: 0.02}
          fast: {model: openai/fast-model, api_base: "{{ env.FAKE_URL }}"}
        steps:
          - id: jury
            uses: jury
            with: {models: [slow, fast], prompt: ask.j2, output_schema: answer.schema.json,
                    vote: {field: verdict, method: majority}}
        output:
          verdict: "{{ steps.jury.verdict }}"
        """)
    env.answer_json({"verdict": "yes"}, model="slow-model")
    env.answer_json({"verdict": "yes"}, model="fast-model", contains="q1")
    env.answer_json({"verdict": "no"}, model="fast-model")
    outcome = run(path, items(project, 4))
    assert {b.model for b in env.batches.created()} == {"slow-model"}
    assert len(env.batches.created()) == 1 and len(env.batches.created()[0].lines) == 4
    assert sorted({r.model for r in env.requests}) == ["fast-model"] and len(env.requests) == 4
    assert [r["verdict"] for r in outcome.results] == ["HUNG_JURY", "yes", "HUNG_JURY", "HUNG_JURY"]


# -- issue 50: batches that cannot get stuck, paid twice or cached wrong ----------------------
def test_two_runs_started_together_upload_each_request_once(project, env):
    """Issue 50, B3: two --batch runs of one input on one cache, started at the same moment: the
    requests one run submits are adopted by the other, never uploaded (and paid) twice. Item
    q0 is held up in a live step first, so both runs gather the other items' requests before
    either submits."""
    project.schema("answer.schema.json", SCHEMA)
    project.prompt("warm.j2", "Warm up {{ item.q }}\n")
    project.prompt("ask.j2", "Question {{ item.q }}\n")
    path = project.pipeline(f"""
        version: 1
        name: together
        env: [FAKE_URL]
        models:
          live: {{model: openai/live-model, api_base: "{{{{ env.FAKE_URL }}}}", retries: 0}}
          m: {{model: openai/m-model, api_base: "{{{{ env.FAKE_URL }}}}", batch: true, retries: 0, {POLL}}}
        steps:
          - id: warm
            uses: llm
            with: {{model: live, prompt: warm.j2}}
          - id: ask
            uses: llm
            with: {{model: m, prompt: ask.j2, output_schema: answer.schema.json}}
        output:
          verdict: "{{{{ steps.ask.output.verdict }}}}"
        """)
    env.script(Reply("warm", delay=3.0), model="live-model", contains="Warm up q0\n")
    env.script(Reply("warm"), model="live-model")
    env.answer_json({"verdict": "yes"}, model="m-model")
    source = items(project, 10)
    # A provider takes minutes to run a batch: the first batch is kept in progress for a few
    # seconds, so both runs submit while it runs however much the second one's start lags on a
    # loaded machine (answered at once, the first run's batch could be collected before the
    # second looked: then it is no longer "started together").
    env.batches.hold = True
    runs = [subprocess.Popen([sys.executable, "-m", "runner.cli.app", "run", str(path), "--input", str(source),
                              "--out", out, "--cache-dir", str(project.root / "cache"), "--quiet"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for out in ("a", "b")]
    deadline = time.monotonic() + 60
    while not env.batches.created() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(6.0)
    env.batches.hold = False
    for process in runs:
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr
    assert [[r["verdict"] for r in project.results(out)] for out in ("a", "b")] == [["yes"] * 10] * 2
    uploaded = [line["body"]["messages"][-1]["content"] for b in env.batches.created() for line in b.lines]
    assert sorted(uploaded) == sorted(f"Question q{n}\n" for n in range(10))     # each request once


@pytest.mark.parametrize("broken", ["a line given twice", "another model's answer"])
def test_a_duplicated_or_mismatched_answer_line_is_an_error_for_its_call_and_never_cached(project, env, capsys,
                                                                                        broken):
    """Issue 50, B4: a gateway's output file holds two different answers for one call, or an
    answer whose body names another model: that call gets an error, said once, nothing cached."""
    env.answer_json({"verdict": "yes"})
    edited: list[str] = []

    def edit(lines: list[dict]) -> list[dict]:
        if edited:                      # the first batch only
            return lines
        first = lines[0]
        edited.append(first["custom_id"])
        if broken == "a line given twice":
            twin = json.loads(json.dumps(first))
            twin["response"]["body"]["choices"][0]["message"]["content"] = json.dumps({"verdict": "no"})
            return [*lines, twin]
        first["response"]["body"]["model"] = "other-model"
        return lines
    env.batches.edit_output = edit
    path = batch_pipeline(project, retries=0)
    outcome = run(path, items(project, 3), batch=True)
    errored = [r for r in outcome.results if r.get("error")]
    assert len(errored) == 1 and [r["verdict"] for r in outcome.results if not r.get("error")] == ["yes", "yes"]
    [batch] = env.batches.created()[:1]
    said = capsys.readouterr().err
    if broken == "a line given twice":
        assert f"batch {batch.id} holds 2 answer lines for this call: none is used" in errored[0]["error"]
        assert said.count(f"runner: batch {batch.id} of model m: 1 call(s) answered more than once") == 1
    else:
        assert f"batch {batch.id} answered this call with model other-model, not m-model" in errored[0]["error"]
        assert said.count(f"runner: batch {batch.id} of model m: 1 call(s) answered by another model "
                          "(other-model)") == 1
    assert len(outcome.summary["batches"]["m"]["problems"]) == 1
    # Nothing of that call was cached: a live run asks it (and the item's next step) again, only it.
    env.batches.edit_output = None
    again = run(path, items(project, 3), out="again")
    asked = {r.prompt for r in env.requests}
    failed_q = f"q{errored[0]['index'] - 1}"
    assert asked == {f"Question {failed_q}\n", f"Second look at {failed_q}: first said yes\n"}
    assert [r["verdict"] for r in again.results] == ["yes"] * 3


def test_a_corrupted_batch_store_is_one_message_naming_it_with_exit_2(project, env, cli):
    """Issue 50, B2: garbage in batches.sqlite3: `run --batch` and `runner batches` name the file
    and say what to do (exit 2), before anything is sent."""
    path = batch_pipeline(project)
    cache = project.root / "cache"
    store = cache / "batches.sqlite3"
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_bytes(b"this is not a database\n" * 200)
    for args in (["run", str(path), "--input", str(items(project, 2)), "--batch", "--cache-dir", str(cache)],
                 ["batches", "--cache-dir", str(cache)], ["batches", "--cache-dir", str(cache), "--cancel"]):
        done = cli(*args)
        assert done.exit_code == 2, done.output
        assert f"{store}: not a usable batch store (file is not a database)" in done.stderr
        assert "move it aside" in done.stderr and "Traceback" not in done.output
    assert env.batches.created() == [] and env.requests == []
