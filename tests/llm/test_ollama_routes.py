"""The Ollama-default pipelines against any OpenAI-compatible server, through their
documented variables; and `--model NAME=provider/model[@api_base]`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.llm.client.spec import build_spec, openai_route

REPO = Path(__file__).resolve().parents[2]
ANALYZER = REPO / "pipelines" / "verdict_analyzer.yaml"
INPUT = REPO / "examples" / "verdict_analyzer" / "input.jsonl"
ANSWER = json.dumps({"verdict": "supports", "confidence": "high",
                     "rationale": "Several randomized trials agree, and the meta-analysis is consistent."})


def results(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / "out" / "results.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("model,base,transport,expected", [
    ("ollama_chat/gpt-oss:20b", "http://h:8080/v1", "auto", ("openai/gpt-oss:20b", "http://h:8080/v1", "http")),
    ("ollama/llama3", "http://h:11434/v1", "auto", ("openai/llama3", "http://h:11434/v1", "http")),
    ("ollama_chat/gpt-oss:20b", "http://h:11434", "auto", ("ollama_chat/gpt-oss:20b", "http://h:11434", "litellm")),
    ("ollama_chat/gpt-oss:20b", "http://h:11434", "http", ("openai/gpt-oss:20b", "http://h:11434/v1", "http")),
    ("ollama_chat/gpt-oss:20b", "http://h:8080/v1", "litellm", ("ollama_chat/gpt-oss:20b", "http://h:8080/v1",
                                                                "litellm")),
    ("openai/m", "http://h/v1", "auto", ("openai/m", "http://h/v1", "http")),
    ("gemini/g", None, "auto", ("gemini/g", None, "litellm")),
])
def test_the_protocol_follows_the_url_or_the_declared_transport(model, base, transport, expected):
    assert openai_route(model, base, transport) == expected
    spec = build_spec("m", {"model": model, "api_base": base, "transport": transport})
    assert (spec.model, spec.api_base, spec.transport) == expected


def test_ollama_base_url_at_an_openai_server_v1_speaks_openai(project, fake_llm, cli, monkeypatch):
    fake_llm.personality = "openai-only"
    fake_llm.script(ANSWER)
    monkeypatch.setenv("OLLAMA_BASE_URL", fake_llm.url)              # http://127.0.0.1:PORT/v1
    result = cli("run", str(ANALYZER), "--input", str(INPUT), "--out", "out", "--limit", "2")
    assert result.exit_code == 0, result.output
    assert [r["verdict"] for r in results(project.root)] == ["supports", "supports"]
    assert {r.path for r in fake_llm.requests} == {"/v1/chat/completions"}
    assert {r.model for r in fake_llm.requests} == {"gpt-oss:20b"}


@pytest.mark.xdist_group("litellm")      # litellm imported by one worker only
def test_an_openai_server_behind_an_ollama_url_is_one_clean_item_error(project, fake_llm, cli, monkeypatch):
    fake_llm.personality = "openai-only"          # answers /api/chat with an OpenAI completion
    fake_llm.script(ANSWER)
    monkeypatch.setenv("OLLAMA_BASE_URL", fake_llm.url.rsplit("/v1", 1)[0])
    result = cli("run", str(ANALYZER), "--input", str(INPUT), "--out", "out", "--limit", "2")
    assert result.exit_code == 3, result.output          # every item errored (issue 32: exit code 3)
    errors = [r["error"] for r in results(project.root)]
    assert len(errors) == 2 and all("did not answer in Ollama's protocol" in e and "/v1" in e for e in errors)
    assert errors[0].startswith("step 'analyze': model 'analyst'")
    everything = result.output + "".join(errors)
    assert "Traceback" not in everything and "litellm" not in everything
    assert len(fake_llm.requests) == 2                    # not retried: the protocol will not change


def test_litellm_messages_lose_their_traceback_and_prefixes():
    from runner.llm.client.transport import classify, first_line
    text = ("litellm.APIConnectionError: litellm.BadRequestError: it broke\nTraceback (most recent call last):\n"
            '  File "x.py", line 1, in f\n    raise X')
    assert first_line(text) == "it broke"
    error = classify(RuntimeError(text))
    assert "Traceback" not in error.message and "litellm." not in error.message


def test_model_flag_points_a_seat_at_a_server_and_seats_it(project, fake_llm, cli):
    fake_llm.script(ANSWER)
    result = cli("run", str(ANALYZER), "--input", str(INPUT), "--out", "out", "--limit", "1",
                 "--model", f"analyst=openai/qwen2.5@{fake_llm.url}")
    assert result.exit_code == 0, result.output
    assert results(project.root)[0]["verdict"] == "supports"
    (request,) = fake_llm.requests
    assert request.model == "qwen2.5" and request.path == "/v1/chat/completions"


def test_model_flag_seats_a_disabled_model_and_render_takes_it(project, fake_llm, cli, monkeypatch):
    citation = REPO / "pipelines" / "citation_judge.yaml"
    monkeypatch.chdir(REPO / "examples" / "citation_judge")
    result = cli("render", str(citation), "--input", "report.md", "--item", "1", "--cache-dir", str(project.root),
                 "--model", f"openai=openai/gpt-4o@{fake_llm.url}", "--model", "local=openai/qwen2.5")
    assert result.exit_code == 0, result.output
    assert "model openai (openai/gpt-4o)" in result.output and f"endpoint: {fake_llm.url}" in result.output
    assert "model local (openai/qwen2.5)" in result.output      # no @: the provider's own endpoint
    assert "endpoint: http://localhost:1234/v1" not in result.output


@pytest.mark.parametrize("flag,message", [
    ("anlyst=openai/m", "--model anlyst=openai/m: models.anlyst: unknown model 'anlyst'. Did you mean 'analyst'?"),
    ("analyst", "--model analyst: expected NAME=provider/model[@api_base]"),
    ("=openai/m", "--model =openai/m: expected NAME=provider/model[@api_base]"),
])
def test_model_flag_errors_name_the_flag(project, cli, flag, message):
    result = cli("run", str(ANALYZER), "--input", str(INPUT), "--out", "out", "--model", flag)
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_model_flag_keeps_an_at_sign_inside_a_model_name():
    from runner.pipeline.overrides import model_flag
    writes = dict((".".join(parts), value) for parts, value in model_flag("j=vertex_ai/claude@20240229"))
    assert writes["models.j.model"] == "vertex_ai/claude@20240229"
    writes = dict((".".join(parts), value) for parts, value in model_flag("j=openai/m@https://h.example/v1"))
    assert writes["models.j.model"] == "openai/m" and writes["models.j.api_base"] == "https://h.example/v1"
    assert writes["models.j.enabled"] is True


@pytest.mark.parametrize("pipeline,folder,given", [
    ("verdict_analyzer", ".", "examples/verdict_analyzer/input.jsonl"),
    ("evidence_judge", ".", "examples/evidence_judge/input.json"),
    ("slide_judge", "examples/slide_judge", "input.json"),
])
def test_every_ollama_default_pipeline_reaches_an_openai_server_through_ollama_base_url(
        pipeline, folder, given, project, fake_llm, cli, monkeypatch):
    fake_llm.personality = "openai-only"
    monkeypatch.setenv("OLLAMA_BASE_URL", fake_llm.url)
    monkeypatch.chdir(REPO / folder)
    result = cli("run", str(REPO / "pipelines" / f"{pipeline}.yaml"), "--input", given,
                 "--out", str(project.root / "out"), "--cache-dir", str(project.root / "cache"), "--limit", "2")
    assert result.exit_code == 3, result.output      # the fake answers "ok", not JSON: every item errors (exit 3); the route is what counts
    assert fake_llm.requests and {r.path for r in fake_llm.requests} == {"/v1/chat/completions"}
    written = (project.root / "out" / "results.jsonl").read_text() + result.output
    assert "Traceback" not in written and "litellm" not in written
