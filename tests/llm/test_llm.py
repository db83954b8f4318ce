"""The llm step against the scripted model: cache, retries, breaker, parsing, repair,
truncation, keys (the fake server where the request on the wire is what is checked)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from email.utils import formatdate
from unittest.mock import ANY

import pytest

from helpers import run, write_json
from runner.testing import Reply

SCHEMA = {"type": "object", "required": ["verdict"],
          "properties": {"verdict": {"enum": ["yes", "no"]}, "reason": {"type": "string"}}}


FAKE_URL = "{{ env.FAKE_URL }}"


def llm_pipeline(project, *, model="scripted/m1", api_base="", extra="", step_extra="", retries=3, api_key=""):
    """One llm step asking model m: the scripted model, or the model at `api_base` (FAKE_URL:
    the fake server, with `model="openai/m1"`)."""
    project.schema("answer.schema.json", SCHEMA)
    project.prompt("ask.j2", "Question {{ item.q }}\n")
    return project.pipeline(f"""
        version: 1
        name: llmt
        env: [FAKE_URL, FAKE_KEY]
        models:
          m:
            model: {model}
            {f'api_base: "{api_base}"' if api_base else ""}
            backoff: 0.01
            retries: {retries}
            {api_key}
            {extra}
        steps:
          - id: ask
            uses: llm
            with: {{model: m, prompt: ask.j2, output_schema: answer.schema.json{step_extra}}}
        output:
          verdict: "{{{{ steps.ask.output.verdict | default(none) }}}}"
          cached: "{{{{ steps.ask.cached | default(none) }}}}"
        """)


def server_pipeline(project, **kwargs):
    """llm_pipeline's model m at the fake server (the test sets FAKE_URL)."""
    return llm_pipeline(project, **{"model": "openai/m1", "api_base": FAKE_URL, **kwargs})


@pytest.fixture
def env(scripted_llm):
    return scripted_llm


@pytest.fixture
def server(fake_llm, monkeypatch):
    monkeypatch.setenv("FAKE_URL", fake_llm.url)
    return fake_llm


def one(project, path, q="1", **kwargs):
    return run(path, write_json(project.root / "in.json", [{"q": q}]), **kwargs).results[0]


def test_answer_parsed_and_cached(project, env):
    env.answer_json({"verdict": "yes"})
    path = llm_pipeline(project)
    assert one(project, path) == {"index": 1, "item_key": ANY, "verdict": "yes", "cached": False}
    assert one(project, path) == {"index": 1, "item_key": ANY, "verdict": "yes", "cached": True}
    assert len(env.requests) == 1
    assert one(project, path, no_cache=True)["cached"] is False     # --no-cache skips reads ...
    assert len(env.requests) == 2
    assert one(project, path)["cached"] is True                    # ... and still writes


@pytest.mark.parametrize("change,misses", [
    ("--set models.m.model=scripted/m2", True),
    ("--set models.m.temperature=0.5", True),
    ("--set models.m.api_key=sk-other-key-123", False),
    ("--set models.m.timeout=33", False),
    ("--set models.m.retries=1", False),
])
def test_cache_key_sensitivity(project, env, change, misses):
    env.answer_json({"verdict": "yes"})
    path = llm_pipeline(project)
    one(project, path)
    assert len(env.requests) == 1
    one(project, path, overrides=[change.split(" ", 1)[1]])
    assert len(env.requests) == (2 if misses else 1)


def test_cache_key_includes_api_base_and_schema(project, server):
    from fakellm import FakeLLM
    env = server
    env.answer_json({"verdict": "yes"})
    path = server_pipeline(project)
    one(project, path)
    other = FakeLLM().start()
    try:
        other.answer_json({"verdict": "no"})
        assert one(project, path, overrides=[f"models.m.api_base={other.url}"])["verdict"] == "no"
    finally:
        other.stop()
    project.schema("answer.schema.json", {**SCHEMA, "required": ["verdict", "reason"]})
    env.reset()
    env.answer_json({"verdict": "no", "reason": "r"})
    assert one(project, path)["verdict"] == "no"
    assert len(env.requests) == 1


def test_failed_calls_are_not_cached_and_rerun_resends_only_them(project, env):
    env.script(Reply(status=400), contains="Question 2")
    env.answer_json({"verdict": "yes"})
    path = llm_pipeline(project)
    items = write_json(project.root / "in.json", [{"q": "1"}, {"q": "2"}])
    first = run(path, items).results
    assert first[0]["verdict"] == "yes" and "HTTP 400" in first[1]["error"]
    env.reset()
    env.answer_json({"verdict": "no"})
    second = run(path, items).results
    assert [r["verdict"] for r in second] == ["yes", "no"]
    assert [r.prompt for r in env.requests] == ["Question 2\n"]


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_transport_errors_retry(project, env, status):
    env.script(Reply(status=status), Reply(status=status), Reply(json.dumps({"verdict": "yes"})))
    path = llm_pipeline(project)
    assert one(project, path)["verdict"] == "yes"
    assert len(env.requests) == 3


def test_retries_give_up_after_the_limit(project, env):
    env.script(Reply(status=503))
    result = one(project, llm_pipeline(project, retries=3))
    assert len(env.requests) == 4
    assert "HTTP 503" in result["error"] and "model 'm' (scripted/m1)" in result["error"]


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_client_errors_never_retry(project, env, status):
    env.script(Reply(status=status))
    result = one(project, llm_pipeline(project))
    assert len(env.requests) == 1
    assert f"HTTP {status}" in result["error"]


def test_timeouts_retry(project, env):
    env.script(Reply(json.dumps({"verdict": "yes"}), delay=5), Reply(json.dumps({"verdict": "no"})))
    result = one(project, llm_pipeline(project, extra="timeout: 0.2"))
    assert result["verdict"] == "no" and len(env.requests) == 2


def test_a_reply_a_test_stopped_waiting_for_is_not_in_the_next_tests_count(fake_llm):
    """The fake server is shared by a worker's tests: a request left behind (its client gave up,
    its reply still being delayed) is not counted in flight by the test after (issue 61: a
    concurrency test saw `peak_in_flight` 3 > 2 on a loaded machine)."""
    def ask(timeout: float) -> None:
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "q"}]}).encode()
        request = urllib.request.Request(fake_llm.url + "/chat/completions", body, {"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=timeout).read()

    fake_llm.script(Reply("late", delay=3))
    with pytest.raises(OSError):
        ask(0.2)                                            # still being delayed when the next test starts
    fake_llm.reset()
    ask(10)
    assert fake_llm.peak_in_flight == 1


def test_retry_after_seconds_is_honoured(project, env):
    env.script(Reply(status=429, headers={"Retry-After": "1"}), Reply(json.dumps({"verdict": "yes"})))
    started = time.monotonic()
    assert one(project, llm_pipeline(project))["verdict"] == "yes"
    gap = env.requests[1].started - env.requests[0].finished
    assert gap >= 0.95 and time.monotonic() - started < 10


def test_retry_after_http_date_is_honoured(project, env):
    # computed when sent; HTTP dates have whole seconds, so 2 s ahead waits 1-2 s
    env.script(Reply(status=503, headers={"Retry-After": lambda: formatdate(time.time() + 2, usegmt=True)}),
               Reply(json.dumps({"verdict": "yes"})))
    assert one(project, llm_pipeline(project))["verdict"] == "yes"
    assert env.requests[1].started - env.requests[0].finished >= 0.9


def test_retry_after_beyond_30s_fails_the_call(project, env):
    env.script(Reply(status=429, headers={"Retry-After": "120"}))
    result = one(project, llm_pipeline(project))
    assert len(env.requests) == 1 and "Retry-After 120 s exceeds 30 s" in result["error"]


def test_refused_connection_opens_the_breaker(project, monkeypatch):
    monkeypatch.setenv("FAKE_URL", "http://127.0.0.1:9/v1")
    path = server_pipeline(project)
    items = write_json(project.root / "in.json", [{"q": str(n)} for n in range(6)])
    started = time.monotonic()
    outcome = run(path, items)
    assert time.monotonic() - started < 10
    errors = {r["error"] for r in outcome.results}
    assert len(errors) == 1
    assert errors.pop().endswith("model 'm' (openai/m1) at http://127.0.0.1:9/v1: connection refused")
    assert outcome.summary["models"]["m"]["calls"] == 0          # refused before any request was sent
    assert "m unreachable" in outcome.summary["hints"][0]


def test_missing_key_is_a_clear_message(project, env):
    project.prompt("ask.j2", "hi")
    path = project.pipeline("""
        version: 1
        name: k
        models: {hosted: {model: gpt-4o-mini}}
        steps: [{id: ask, uses: llm, with: {model: hosted, prompt: ask.j2}}]
        output: {a: "{{ steps.ask.raw }}"}
        """)
    results = run(path, write_json(project.root / "in.json", [{}, {}])).results
    assert results[0]["error"] == ("step 'ask': model 'hosted' (gpt-4o-mini) at the provider default: "
                                   "missing API key: set OPENAI_API_KEY")
    assert results[1]["error"] == results[0]["error"]


@pytest.mark.parametrize("answer", [
    '{"verdict": "yes"}',
    'Sure!\n```json\n{"verdict": "yes"}\n```\nHope that helps.',
    'Here:\n```\n{"verdict": "yes"}\n```',
    'My verdict is {"verdict": "yes", "reason": "the text {says} so"} as asked.',
])
def test_parse_ladder(project, env, answer):
    env.script(answer)
    assert one(project, llm_pipeline(project))["verdict"] == "yes"


@pytest.mark.parametrize("answer,message", [
    ("no json here", "the answer is not valid JSON"),
    ('{"verdict": "maybe"}', "verdict: 'maybe' is not one of ['yes', 'no']"),
    ('{"reason": "x"}', "(root): 'verdict' is a required property"),
])
def test_parse_failures_fail_without_retry_by_default(project, env, answer, message):
    env.script(answer)
    result = one(project, llm_pipeline(project))
    assert message in result["error"] and len(env.requests) == 1


def test_repair_re_asks_with_the_validator_message(project, env):
    env.script('{"verdict": "maybe"}', '{"verdict": "no"}')
    result = one(project, llm_pipeline(project, step_extra=", repair: 2"))
    assert result["verdict"] == "no" and len(env.requests) == 2
    retry = env.requests[1].messages
    assert retry[-2] == {"role": "assistant", "content": '{"verdict": "maybe"}'}
    assert "'maybe' is not one of ['yes', 'no']" in retry[-1]["content"]


def test_unparseable_answers_are_not_cached(project, env):
    env.script("garbage")
    path = llm_pipeline(project)
    assert "not valid JSON" in one(project, path)["error"]
    env.reset()
    env.answer_json({"verdict": "yes"})
    assert one(project, path)["verdict"] == "yes" and len(env.requests) == 1


@pytest.mark.parametrize("reply,message", [
    (Reply('{"verdict": "ye', finish_reason="length"), "truncated (finish_reason=length)"),
    (Reply(empty_choices=True), "the answer has no choices"),
    (Reply(content=None), "the answer is empty"),
    (Reply(content="   "), "the answer is empty"),
])
def test_truncated_and_empty_answers(project, env, reply, message):
    env.script(reply)
    result = one(project, llm_pipeline(project))
    assert message in result["error"]


def test_cache_clear_removes_logs_older_versions_kept(project, env, cli):
    env.answer_json({"verdict": "yes"})
    run(llm_pipeline(project), write_json(project.root / "in.json", [{"q": "1"}]))
    kept = project.root / "cache" / "call_logs"
    kept.mkdir()
    (kept / "0123abcd.txt").write_text("=== PROMPT ===")
    assert cli("cache", "clear").exit_code == 0
    assert not kept.exists()


def test_api_key_never_reaches_logs_cache_or_results(project, server, monkeypatch):
    env = server
    secret = "sk-super-secret-value-42"
    monkeypatch.setenv("FAKE_KEY", secret)
    env.script(Reply(status=401))
    path = server_pipeline(project, api_key='api_key: "{{ env.FAKE_KEY }}"')
    run(path, write_json(project.root / "in.json", [{"q": "1"}]))
    env.reset()
    env.answer_json({"verdict": "yes"})
    run(path, write_json(project.root / "in.json", [{"q": "2"}]))
    assert env.requests[0].headers.get("authorization") == f"Bearer {secret}"
    for file in project.root.rglob("*"):
        if file.is_file():
            assert secret.encode() not in file.read_bytes(), file


def test_unimportable_litellm_is_a_per_call_error(project):
    path = llm_pipeline(project, extra="transport: litellm")     # not the scripted model: litellm
    write_json(project.root / "in.json", [{"q": "1"}, {"q": "2"}])
    block = "import sys; sys.modules['litellm'] = None; from runner.cli.app import main; main()"
    done = subprocess.run([sys.executable, "-c", block, "run", str(path), "--input", "in.json", "--out", "o"],
                          cwd=project.root, env=dict(os.environ, RUNNER_CACHE_DIR=str(project.root / "cache")),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr               # every item errored: written, then exit 3 (issue 32)
    assert "2/2 items: step 'ask': model 'm' (scripted/m1) at " in done.stderr
    for result in project.results("o"):
        assert "litellm cannot be imported" in result["error"]


def test_request_key_is_the_sha256_of_the_whole_canonical_payload():
    """Keys of caches written before the schema's JSON was reused stay valid."""
    import hashlib
    import json

    from runner.llm.cache.key import CACHE_FORMAT, request_key

    schema = {"type": "object", "properties": {"verdict": {"enum": ["VALID", "INVALID"]}, "é": {}}}
    for messages, sampling, mode in (([{"role": "user", "content": "Is it ünïcode? \u2028"}], {"temperature": 0.3}, "json_schema"),
                                     ([{"role": "user", "content": "again"}], {"max_tokens": 5, "seed": 1}, None)):
        expected = hashlib.sha256(json.dumps(
            {"format": CACHE_FORMAT, "model": "openai/m", "api_base": "http://h/v1", "messages": messages,
             "sampling": {k: sampling.get(k) for k in ("temperature", "top_p", "max_tokens", "seed", "stop")},
             "response_format": mode, "output_schema": schema, "sample": 2, "extra": {"a": 1}},
            sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")).hexdigest()
        for _ in range(2):          # the second time the schema's JSON comes from memory
            assert request_key(model="openai/m", api_base="http://h/v1", messages=messages, sampling=sampling,
                               response_format=mode, output_schema=schema, sample=2, extra={"a": 1}) == expected
    # The schema's place in the payload is found even where the same text stands earlier.
    tricky = [{"role": "user", "content": '"output_schema":null', "output_schema": None}]
    expected = hashlib.sha256(json.dumps(
        {"format": CACHE_FORMAT, "model": "m", "api_base": None, "messages": tricky,
         "sampling": dict.fromkeys(("temperature", "top_p", "max_tokens", "seed", "stop")),
         "response_format": None, "output_schema": schema, "sample": 0, "extra": {"output_schema": None}},
        sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")).hexdigest()
    assert request_key(model="m", api_base=None, messages=tricky, sampling={}, output_schema=schema,
                       extra={"output_schema": None}) == expected
    other = {**schema, "required": ["verdict"]}
    assert request_key(model="m", api_base=None, messages=[], sampling={}, output_schema=other) != \
        request_key(model="m", api_base=None, messages=[], sampling={}, output_schema=schema)
