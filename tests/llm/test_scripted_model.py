"""The in-process scripted model (runner.testing): a reply becomes the answer or the error the
HTTP transport makes of the same reply from the fake server; `scripted/...` models reach it
only while it is installed; docs/models.md's example runs as written."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from helpers import copy_example
from runner.llm.client.http import HTTPTransport
from runner.llm.client.routing import register_transport, registered_transports
from runner.llm.client.spec import build_spec
from runner.llm.client.transport import TransportError
from runner.testing import Reply, ScriptedModel

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "models.md"
EXAMPLE = REPO / "examples" / "citation_judge"
MESSAGES = [{"role": "user", "content": "Is it so?"}]
REPLIES = {
    "an answer": Reply('{"verdict": "yes"}'),
    "cut short": Reply('{"verdict": "ye', finish_reason="length"),
    "no content": Reply(content=None),
    "no choices": Reply(empty_choices=True),
    "a client error": Reply(status=400),
    "a server's own message": Reply(status=400, raw_body='{"error": {"message": "response_format is not supported"}}'),
    "rate limited": Reply(status=429, headers={"Retry-After": "3"}),
    "overloaded": Reply(status=503, headers={"Retry-After": lambda: "2"}),
    "not JSON": Reply(raw_body='{"choices": [', status=200),
    "JSON that is no completion": Reply(raw_body="[1, 2]"),
    "a redirect": Reply(status=302, headers={"Location": "https://user:pw@elsewhere.example/v1?k=1"}),
    "too large": Reply("x" * 5000),
}


def outcome(send) -> tuple:
    try:
        completion = asyncio.run(send())
    except TransportError as error:
        return ("error", error.kind, error.status, error.message, error.retry_after)
    return ("answer", completion.text, completion.finish_reason, completion.usage, completion.model,
            completion.choices, completion.cost)


@pytest.mark.parametrize("name", REPLIES)
def test_a_reply_gives_what_the_http_transport_gives(fake_llm, scripted_llm, name):
    entry = {"max_response_bytes": 2000}
    fake_llm.script(REPLIES[name])
    scripted_llm.script(REPLIES[name])
    over_http = build_spec("m", {"model": "openai/m", "api_base": fake_llm.url, **entry})
    in_process = build_spec("m", {"model": "scripted/m", **entry}, registered_transports())
    assert in_process.transport == "scripted"

    async def http():
        transport = HTTPTransport()
        try:
            return await transport.complete(over_http, MESSAGES, {"temperature": 0})
        finally:
            await transport.aclose()

    expected = outcome(http)
    assert outcome(lambda: scripted_llm.complete(in_process, MESSAGES, {"temperature": 0})) == expected
    (sent,) = fake_llm.requests
    (asked,) = scripted_llm.requests
    assert (asked.model, asked.messages, asked.prompt, asked.status) == (sent.model, sent.messages, sent.prompt,
                                                                         sent.status)
    assert asked.body == {k: v for k, v in sent.body.items() if k != "stream"}      # a local server streams


def test_a_dropped_connection_is_a_connection_error(scripted_llm):
    scripted_llm.script(Reply(close=True))
    spec = build_spec("m", {"model": "scripted/m"}, registered_transports())
    assert outcome(lambda: scripted_llm.complete(spec, MESSAGES, {}))[:3] == ("error", "connection", None)


def test_held_answers_stay_in_flight_until_released(scripted_llm):
    spec = build_spec("m", {"model": "scripted/m"}, registered_transports())

    async def three_held() -> list[str]:
        scripted_llm.hold()
        asked = [asyncio.ensure_future(scripted_llm.complete(spec, MESSAGES, {})) for _ in range(3)]
        while scripted_llm.in_flight < 3:
            await asyncio.sleep(0)
        assert not any(a.done() for a in asked)
        scripted_llm.release()
        return [(await a).text for a in asked]

    assert asyncio.run(three_held()) == ["ok"] * 3
    assert scripted_llm.peak_in_flight == 3 and scripted_llm.in_flight == 0


def test_scripted_models_reach_it_only_while_it_is_installed():
    model = ScriptedModel("mock")
    assert build_spec("m", {"model": "mock/judge"}, registered_transports()).transport == "litellm"
    model.install()
    try:
        spec = build_spec("m", {"model": "mock/judge"}, registered_transports())
        assert spec.transport == "mock" and spec.describe() == "model 'm' (mock/judge) at mock (provider default)"
        assert build_spec("m", {"model": "mock/judge", "transport": "http"}, registered_transports()).transport == "http"
    finally:
        model.uninstall()
    assert "mock" not in registered_transports()
    for name in ("http", "auto", "not a name"):
        with pytest.raises(ValueError, match="cannot name a transport"):
            register_transport(name, ScriptedModel)


def test_the_readmes_example_runs_as_written(tmp_path, monkeypatch):
    section = DOC.read_text(encoding="utf-8").split("### Testing a judge without a model", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.DOTALL)
    copy_example(EXAMPLE, tmp_path / "examples" / "citation_judge")
    for folder in ("pipelines", "prompts", "schemas"):
        (tmp_path / folder).symlink_to(REPO / folder)
    monkeypatch.chdir(tmp_path / "examples" / "citation_judge")
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(tmp_path / "cache"))
    exec(compile(code, "docs/models.md", "exec"), {})
    assert "scripted" not in registered_transports()
