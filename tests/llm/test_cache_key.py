"""The cache key (runner/llm/cache.py's request_key): sha256 of one canonical JSON of what
changes an answer. Users' caches are keyed by it: a key made before must be made again."""

from __future__ import annotations

import asyncio
import hashlib
import json
from types import SimpleNamespace
from typing import Any

import diskcache
import pytest
from test_llm import server_pipeline

from helpers import run, write_json
from runner.llm.cache.key import request_key

SCHEMA = {"type": "object", "properties": {"verdict": {"enum": ["VALID", "INVALID"]}, "reason": {"type": "string"}},
          "required": ["verdict"]}
MESSAGES = [{"role": "system", "content": "You judge citations."},
            {"role": "user", "content": "Claim: «x» 😀 \\ \"q\""}]
BASE = dict(model="openai/local-model", api_base="http://localhost:1234/v1", messages=MESSAGES,
            sampling={"temperature": 0.0, "max_tokens": 1024}, response_format="json_schema", output_schema=SCHEMA)

# Keys runner made before this function was written as one canonical encoding (at 62dc680,
# and the first two at 54b3b60): a change here orphans every answer users have cached.
PINNED = {
    "df23f66b9cfc67ab283a3373060f2e76270a682d82203de9c2bc10ed2bd88e2b": dict(
        model="openai/gpt-4o-mini", api_base="http://127.0.0.1:1234/v1/",
        messages=[{"role": "system", "content": 'Judge. "Quote" \u00e9'}, {"role": "user", "content": "Claim: x \ud83d"}],
        sampling={"temperature": 0.0, "max_tokens": 512, "seed": None, "top_p": None, "stop": None},
        response_format="json_schema", sample=1, extra={"top_k": 20}, cache_as=None,
        output_schema={"type": "object", "properties": {"verdict": {"enum": ["VALID", "INVALID"]},
                                                        "reason": {"type": "string"}}, "required": ["verdict"]}),
    "9c65d284335dae84c87c017d7ca6f2f7ef02fd11f190b210f57d4b8fd365da9e": dict(
        model="openai/gpt-4o-mini", api_base="http://127.0.0.1:1234/v1/",
        messages=[{"role": "system", "content": 'Judge. "Quote" \u00e9'}, {"role": "user", "content": "Claim: x \ud83d"}],
        sampling={"temperature": 0.0, "max_tokens": 512, "seed": None, "top_p": None, "stop": None},
        response_format=None, output_schema=None, sample=1, extra={"top_k": 20}, cache_as="srv"),
    "e2e12322fe71dea163ef2e4db04f49547bf3d0b32862a67fcfe3099e972e4895": dict(
        model="openai/local-model", api_base="http://127.0.0.1:1234/v1", messages=[{"role": "user", "content": "q"}],
        sampling={"max_tokens": 1024}),
    "c18546dcc641d10518c924a06cd99f304522f898856c0b4a55cef0d39532aabc": BASE,
    "e54f92c0d36ffb76a1fb5022b06aea3d75916a4d92689f78e0f1c15bc5ead6c6": {**BASE, "response_format": "json_object"},
    "614fd692fb9d3f85008faa8cd5cb5d8675aae2bafbf939c6f84069bf440c2a4b": {**BASE, "response_format": None},
    "2f78d658f4f269de53800cb168a2844ced08fd32e50c16999b3de4e4e5ca4b73": dict(
        model="gpt-4o-mini", api_base=None, messages=MESSAGES, sample=2,
        sampling={"temperature": 0.7, "top_p": 0.9, "max_tokens": 256, "seed": 42, "stop": ["\n\n"]}),
    "86557d7c9eb7759944f5eab3e0b42e587cfa8ccff67370c45622ef28ff8ca47d": dict(
        model="ollama_chat/gemma3", api_base="http://gpu:11434", messages=MESSAGES, sampling={"max_tokens": 64},
        extra={"num_ctx": 8192, "keep_alive": "5m"}, cache_as="shared-gpu"),
    "ee2d7c2199905255f2a0d6175ca475564244331967fbf43d9fd73f17c761e231": dict(
        model="m", api_base=None, messages=[{"role": "user", "content": "x"}], sampling={"temperature": 1, "seed": 0}),
}


@pytest.mark.parametrize("key", PINNED)
def test_keys_made_before_are_made_again(key):
    assert request_key(**PINNED[key]) == key


def test_a_run_stores_its_answers_under_the_keys_it_always_did(project, fake_llm, monkeypatch):
    """The whole path: sampling after the model's defaults, messages as sent, the mode asked."""
    monkeypatch.setenv("FAKE_URL", fake_llm.url)
    fake_llm.answer_json({"verdict": "yes"})
    run(server_pipeline(project, extra="cache_as: pinned"), write_json(project.root / "in.json", [{"q": "1"}, {"q": "é 😀"}]))
    with diskcache.Cache(str(project.root / "cache" / "responses")) as cache:
        assert sorted(cache.iterkeys()) == ["1a32a2c0b78e565049e8485d272cecd60db311f176965dc3df9bcf71912e2bcf",
                                            "cc2d96639c71b02669068f5f0810c71af1b4967f9a73fc7aea50e7ac09372aac"]


def test_the_key_is_the_hash_of_one_canonical_json_of_the_request():
    payload = {"format": 1, "model": BASE["model"], "api_base": "http://localhost:1234/v1", "messages": MESSAGES,
               "sampling": {"temperature": 0.0, "top_p": None, "max_tokens": 1024, "seed": None, "stop": None},
               "response_format": "json_schema", "output_schema": SCHEMA, "sample": 0, "extra": {}}
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert request_key(**BASE) == hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_the_same_request_makes_the_same_key_whatever_its_dicts_order():
    shuffled = dict(reversed(list(BASE.items())))
    shuffled["messages"] = [dict(reversed(list(m.items()))) for m in MESSAGES]
    shuffled["output_schema"] = dict(reversed(list(SCHEMA.items())))
    assert request_key(**shuffled) == request_key(**BASE)


@pytest.mark.parametrize("change", [
    {"model": "openai/other-model"},
    {"api_base": "http://localhost:8080/v1"},
    {"messages": [*MESSAGES, {"role": "user", "content": "again"}]},
    {"messages": [MESSAGES[0], {"role": "user", "content": "Claim: y"}]},
    {"messages": [{**MESSAGES[0], "role": "user"}, MESSAGES[1]]},
    {"sampling": {"temperature": 0.5, "max_tokens": 1024}},
    {"sampling": {"temperature": 0.0, "max_tokens": 2048}},
    {"sampling": {"temperature": 0.0, "max_tokens": 1024, "top_p": 0.5}},
    {"sampling": {"temperature": 0.0, "max_tokens": 1024, "seed": 1}},
    {"sampling": {"temperature": 0.0, "max_tokens": 1024, "stop": ["END"]}},
    {"response_format": "json_object"},
    {"response_format": None},
    {"output_schema": {**SCHEMA, "required": []}},
    {"sample": 1},
    {"extra": {"top_k": 20}},
    {"cache_as": "my-server"},
])
def test_every_field_that_changes_an_answer_changes_the_key(change):
    assert request_key(**{**BASE, **change}) != request_key(**BASE)


def test_values_equal_in_python_but_not_in_json_make_their_own_keys():
    made = {request_key(**{**BASE, "sampling": {"temperature": value, "seed": value}})
            for value in (1, 1.0, True, 0, 0.0, -0.0, False, "1")}
    assert len(made) == 8


def test_sampling_keys_that_are_not_sampling_do_not_reach_the_key():
    assert request_key(**{**BASE, "sampling": {**BASE["sampling"], "timeout": 30, "api_key": "sk-x"}}) == \
        request_key(**BASE)


def test_litellm_gets_copies_of_what_calls_share(monkeypatch):
    """A step's calls share its schema (in the response format): a provider adapter inside
    litellm that rewrites what it is given must not change what the next call sends."""
    from runner.llm.client import transport as transport_module
    from runner.llm.client.spec import build_spec
    from runner.llm.client.structured import response_format

    async def rewriting(**kwargs: Any) -> Any:
        kwargs["messages"][0]["content"] = "rewritten"
        kwargs["response_format"]["json_schema"]["schema"]["properties"].clear()
        raise RuntimeError("stop here")

    monkeypatch.setattr(transport_module, "import_litellm", lambda: SimpleNamespace(acompletion=rewriting))
    messages = [{"role": "user", "content": "shared"}]
    schema = {"type": "object", "properties": {"verdict": {"type": "string"}}}
    spec = build_spec("m", {"model": "openai/m", "api_base": "http://127.0.0.1:9/v1", "transport": "litellm"})
    with pytest.raises(transport_module.TransportError):
        asyncio.run(transport_module.LiteLLMTransport().complete(
            spec, messages, {"response_format": response_format("json_schema", schema)}))
    assert messages == [{"role": "user", "content": "shared"}]
    assert schema["properties"] == {"verdict": {"type": "string"}}
