"""A run's LLM calls: one calls.jsonl in the run folder, a line per call (runner/llm/calls/),
read back by `runner calls`; secrets never reach it."""

from __future__ import annotations

import json
import re

import diskcache
import pytest
from test_llm import llm_pipeline, server_pipeline

from helpers import calls_of, run, write_json
from runner.testing import Reply

FIELDS = ["item", "call", "step", "model", "model_id", "endpoint", "key", "messages", "answer", "usage", "attempts",
          "started", "ended", "latency_ms", "cached", "error"]


@pytest.fixture
def env(scripted_llm):
    return scripted_llm


@pytest.fixture
def server(fake_llm, monkeypatch):
    monkeypatch.setenv("FAKE_URL", fake_llm.url)
    return fake_llm


def test_a_run_writes_one_line_per_call_and_nothing_else(project, env):
    env.script(Reply('{"verdict": "yes"}'), contains="Question 1")
    env.answer_json({"verdict": "no"})
    run(llm_pipeline(project), write_json(project.root / "in.json", [{"q": "1"}, {"q": "2"}, {"q": "3"}]))
    out = project.root / "out"
    assert not (out / "llm_logs").exists()
    calls = calls_of(out)
    assert sorted(c["item"] for c in calls) == [1, 2, 3]
    first = next(c for c in calls if c["item"] == 1)
    assert list(first) == FIELDS
    assert first["call"] == "1.1" and first["step"] == "ask" and first["model"] == "m"
    assert first["model_id"] == "scripted/m1" and first["endpoint"] == "scripted (provider default)"
    assert first["messages"] == [{"role": "user", "content": "Question 1\n"}]
    assert first["answer"] == '{"verdict": "yes"}' and first["error"] is None
    assert first["cached"] is False and first["attempts"] == 1 and first["usage"]["total_tokens"] > 0
    assert first["started"] <= first["ended"] and isinstance(first["latency_ms"], int)
    with diskcache.Cache(str(project.root / "cache" / "responses")) as cache:
        assert {c["key"] for c in calls} == set(cache.iterkeys())          # the key its answer is stored under


def test_cached_calls_are_written_like_sent_ones_and_a_rerun_replaces_the_file(project, env):
    env.answer_json({"verdict": "yes"})
    path = llm_pipeline(project)
    items = write_json(project.root / "in.json", [{"q": "1"}, {"q": "2"}])
    run(path, items)
    sent = sorted(calls_of(project.root / "out"), key=lambda c: c["item"])
    run(path, items)                                        # into the same folder: its calls replace the first run's
    cached = sorted(calls_of(project.root / "out"), key=lambda c: c["item"])
    assert len(cached) == 2 and all(c["cached"] and c["attempts"] == 0 for c in cached)
    same = ("item", "call", "step", "model", "model_id", "endpoint", "key", "messages", "answer", "usage")
    assert [{k: c[k] for k in same} for c in cached] == [{k: c[k] for k in same} for c in sent]


def test_a_failed_call_says_why_and_keeps_what_came(project, env):
    env.script(Reply('{"verdict": "ye', finish_reason="length"), contains="Question 1")
    env.script(Reply(status=400, raw_body=json.dumps({"error": {"message": "bad request"}})), contains="Question 2")
    run(llm_pipeline(project, retries=0), write_json(project.root / "in.json", [{"q": "1"}, {"q": "2"}]))
    calls = {c["item"]: c for c in calls_of(project.root / "out")}
    assert "truncated" in calls[1]["error"] and calls[1]["answer"] == '{"verdict": "ye'
    assert "HTTP 400: bad request" in calls[2]["error"] and calls[2]["answer"] is None


def test_secrets_never_reach_the_calls_file(project, server, monkeypatch):
    env = server
    secret, password = "sk-super-secret-value-42", "hunter2-long-password"
    monkeypatch.setenv("FAKE_KEY", secret)
    monkeypatch.setenv("FAKE_URL", env.url.replace("http://", f"http://user:{password}@"))
    env.answer_json({"verdict": "yes", "reason": f"you sent {secret}"})        # a model that echoes the key
    path = server_pipeline(project, api_key='api_key: "{{ env.FAKE_KEY }}"')
    project.prompt("ask.j2", "Question {{ item.q }} with key {{ env.FAKE_KEY }}\n")
    run(path, write_json(project.root / "in.json", [{"q": "1"}]))
    text = (project.root / "out" / "calls.jsonl").read_text(encoding="utf-8")
    assert secret not in text and password not in text
    [call] = calls_of(project.root / "out")
    assert call["messages"][0]["content"] == "Question 1 with key ***\n"
    assert "user:" not in call["endpoint"]


def test_runner_calls_prints_a_runs_calls_as_text(project, env, cli):
    env.answer_json({"verdict": "yes"})
    path = llm_pipeline(project)
    write_json(project.root / "in.json", [{"q": "1"}, {"q": "2"}])
    assert cli("run", str(path), "--input", "in.json", "--quiet").exit_code == 0
    [group] = (project.root / "reports" / "llmt").iterdir()
    [folder] = (p for p in group.iterdir() if p.is_dir())
    for where in (group, group / "latest", folder):          # a group folder, a `latest` file, a run folder
        shown = cli("calls", str(where), "--item", "2")
        assert shown.exit_code == 0, shown.output
        assert re.fullmatch(r'### call 2\.1: item 2, step ask, model m \(scripted/m1\), sent, 1 attempt\(s\), \d+ ms\n'
                            r'=== PROMPT ===\nQuestion 2\n\n\n=== RESPONSE ===\n\{"verdict": "yes"\}\n', shown.output)
    every = cli("calls", str(group))
    assert every.output.count("=== PROMPT ===") == 2
    assert cli("calls", str(group), "--model", "m").output == every.output
    other = cli("calls", str(group), "--model", "mm")       # no such model, no such item: a mistake, said (exit 2)
    assert other.exit_code == 2 and "--model mm: unknown model 'mm'. Did you mean 'm'?" in other.stderr
    beyond = cli("calls", str(group), "--item", "9")
    assert beyond.exit_code == 2 and "--item 9: the run has no result for item 9" in beyond.stderr
    missing = cli("calls", str(project.root / "nowhere"))
    assert missing.exit_code == 2 and "no such run folder" in missing.output


def test_what_a_model_wrote_or_was_sent_loses_only_known_secrets(project, env, monkeypatch):
    """Review finding: the structural redaction (`NAME = value`) rewrote answers and prompts: a JSON
    string holding `API_KEY = \\"sk-test\\"` became invalid, `primary key = user_id` lost its words.
    What a model wrote or was sent hides known secrets by value only."""
    secret = "sk-known-secret-value-42"
    monkeypatch.setenv("FAKE_KEY", secret)
    reason = f'The diff sets API_KEY = "sk-test" in config.py; primary key = user_id; it echoes {secret}'
    env.answer_json({"verdict": "no", "reason": reason})
    path = llm_pipeline(project, api_key='api_key: "{{ env.FAKE_KEY }}"')
    project.prompt("ask.j2", "Question {{ item.q }}: hash key: 'deadbeef1234', password = x1y2z3w4v5\n")
    outcome = run(path, write_json(project.root / "in.json", [{"q": "1"}]))
    assert outcome.results[0]["verdict"] == "no" and "error" not in outcome.results[0]
    [call] = calls_of(project.root / "out")
    assert json.loads(call["answer"])["reason"] == reason.replace(secret, "***")
    assert call["messages"][0]["content"] == "Question 1: hash key: 'deadbeef1234', password = x1y2z3w4v5\n"
