"""Cache keys name the model's server, not the spelling of its URL; `cache_as` names it
for good."""

from __future__ import annotations

from unittest.mock import ANY

import pytest
from test_llm import one, server_pipeline

from runner.llm.cache.key import endpoint_identity, request_key

MESSAGES = [{"role": "user", "content": "q"}]


@pytest.mark.parametrize("spelling", [
    "http://localhost:1234/v1", "http://localhost:1234/v1/", "http://127.0.0.1:1234/v1", "HTTP://LocalHost:1234/v1//",
    "http://[::1]:1234/v1", "http://127.0.0.2:1234/v1", "http://user:secret@localhost:1234/v1",
])
def test_spellings_of_one_local_server_are_one_endpoint(spelling):
    assert endpoint_identity(spelling) == "http://localhost:1234/v1"
    assert request_key(model="openai/m", api_base=spelling, messages=MESSAGES, sampling={}) == \
        request_key(model="openai/m", api_base="http://localhost:1234/v1", messages=MESSAGES, sampling={})


@pytest.mark.parametrize("spelling,identity", [
    ("https://API.example.com:443/v1/", "https://api.example.com/v1"),
    ("http://example.com:80", "http://example.com"),
    ("http://example.com:8080/v1", "http://example.com:8080/v1"),
    ("http://[2001:DB8::1]:8000/v1", "http://[2001:db8::1]:8000/v1"),
    ("https://example.com/V1", "https://example.com/V1"),         # a path's case is the server's business
])
def test_hosts_and_default_ports_are_normalised(spelling, identity):
    assert endpoint_identity(spelling) == identity


def test_different_servers_stay_different_and_cache_as_names_one():
    def key(base: str | None, cache_as: str | None = None) -> str:
        return request_key(model="openai/m", api_base=base, messages=MESSAGES, sampling={}, cache_as=cache_as)
    assert key("http://localhost:1234/v1") != key("http://localhost:8080/v1")
    assert key("http://localhost:1234/v1") != key("http://other:1234/v1")
    assert key("http://localhost:1234/v1", "local") == key("http://gpu-box:8080/v1", "local")
    assert key("http://localhost:1234/v1", "local") != key("http://localhost:1234/v1")
    assert key(None, "local") != key(None, "other")


def test_a_rerun_through_another_spelling_is_served_from_the_cache(project, fake_llm, monkeypatch):
    fake_llm.answer_json({"verdict": "yes"})
    port = fake_llm.url.rsplit(":", 1)[1].split("/")[0]
    monkeypatch.setenv("FAKE_URL", fake_llm.url)                          # http://127.0.0.1:PORT/v1
    path = server_pipeline(project)
    assert one(project, path)["cached"] is False
    monkeypatch.setenv("FAKE_URL", f"HTTP://LOCALHOST:{port}/v1/")
    assert one(project, path) == {"index": 1, "item_key": ANY, "verdict": "yes", "cached": True}
    assert len(fake_llm.requests) == 1


def test_cache_as_keeps_answers_across_servers(project, fake_llm, monkeypatch):
    from fakellm import FakeLLM
    fake_llm.answer_json({"verdict": "yes"})
    monkeypatch.setenv("FAKE_URL", fake_llm.url)
    path = server_pipeline(project, extra="cache_as: my-server")
    assert one(project, path)["cached"] is False
    other = FakeLLM().start()
    try:
        other.answer_json({"verdict": "no"})
        monkeypatch.setenv("FAKE_URL", other.url)
        assert one(project, path) == {"index": 1, "item_key": ANY, "verdict": "yes", "cached": True}
        assert one(project, path, overrides=["models.m.model=openai/m2"])["verdict"] == "no"   # the model counts
        assert len(other.requests) == 1
    finally:
        other.stop()
