"""The JSON that many calls share is encoded once (runner/llm/shared_json.py): the cache key
and the request body must still be exactly what one encoding of the whole would give."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from runner.llm.cache import CACHE_FORMAT, endpoint_identity, request_key
from runner.llm.shared_json import PLAIN, body_text, canonical
from runner.llm.structured import response_format
from runner.safetext import utf8

# Keys made by runner before the splices (main at 54b3b60): a change here orphans every
# answer users have cached.
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
}
# Strings that look like the parts the key splices in, inside values that are not those parts.
TRICKY = ["x", "é", '"q"', "\\", "messages", '"messages":null', '"output_schema":null', "\ud83d", "😀", ""]


def whole_key(**kw: Any) -> str:
    """The key as one canonical encoding of the whole payload (what the format defines)."""
    payload = {"format": CACHE_FORMAT, "model": kw["model"],
               "api_base": endpoint_identity(kw["api_base"]) if kw["cache_as"] is None else None,
               "messages": kw["messages"],
               "sampling": {k: kw["sampling"].get(k) for k in ("temperature", "top_p", "max_tokens", "seed", "stop")},
               "response_format": kw["response_format"], "output_schema": kw["output_schema"], "sample": kw["sample"],
               "extra": kw["extra"] or {}}
    if kw["cache_as"] is not None:
        payload["cache_as"] = kw["cache_as"]
    return hashlib.sha256(utf8(canonical(payload))).hexdigest()


def tricky_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 2 or roll < 0.3:
        return rng.choice([*TRICKY, 1, 1.5, 1e-05, None, True])
    if roll < 0.6:
        return [tricky_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(TRICKY): tricky_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def test_keys_made_before_are_made_again():
    for key, kw in PINNED.items():
        assert request_key(**kw) == key


def test_the_spliced_key_is_the_key_of_the_whole_payload():
    rng = random.Random(7)
    shared_messages = [{"role": "user", "content": "the same for every seat"}]
    for _ in range(3000):
        kw = dict(model=rng.choice(["openai/m", 'x"messages":null']),
                  api_base=rng.choice([None, "http://127.0.0.1:8/v1", "https://a.b/v1/"]),
                  messages=rng.choice([shared_messages, [{"role": "user", "content": tricky_value(rng)},
                                                         {"role": "system", "content": tricky_value(rng),
                                                          "messages": None}][:rng.randint(1, 2)]]),
                  sampling={"temperature": rng.choice([0.0, 1, None]),
                            "stop": rng.choice([None, ['"messages":null'], "s"])},
                  response_format=rng.choice([None, "json_schema", "json_object"]),
                  output_schema=rng.choice([None, {"type": "object", "properties": {"b": {}, "a": tricky_value(rng)}},
                                            {"output_schema": None}]),
                  sample=rng.randint(0, 2), extra=rng.choice([None, {"messages": None}, {"k": tricky_value(rng)}]),
                  cache_as=rng.choice([None, "srv"]))
        assert request_key(**kw) == whole_key(**kw), kw


def test_a_changed_message_list_is_encoded_anew():
    messages = [{"role": "user", "content": "first"}]
    kw = dict(model="m", api_base=None, sampling={}, messages=messages)
    first = request_key(**kw)
    changed = [*messages, {"role": "user", "content": "again"}]
    assert request_key(**{**kw, "messages": changed}) != first
    assert request_key(**{**kw, "messages": [dict(messages[0])]}) == first      # an equal list, another object


def test_a_body_is_the_json_of_the_request_with_the_schema_in_its_own_order():
    schema = {"type": "object", "properties": {"reason": {"type": "string"}, "verdict": {"type": "string"}}}
    messages = [{"role": "user", "content": 'a "quoted" é \\ claim'}]
    for mode in ("json_schema", "json_object"):
        wanted = response_format(mode, schema)
        assert response_format(mode, schema) is wanted          # one object per step: its JSON made once
        body = {"temperature": 0.0, "model": "m", "response_format": wanted, "messages": messages, "stream": True}
        text = body_text(body)
        assert json.loads(text) == body
        sent = json.loads(text)["response_format"]
        inner = sent["json_schema"]["schema"] if mode == "json_schema" else sent["schema"]
        assert list(inner["properties"]) == ["reason", "verdict"]     # a model writes keys in the schema's order
    assert json.loads(body_text({"messages": messages})) == {"messages": messages}
    assert body_text({"model": "m"}) == json.dumps({"model": "m"})


def test_the_memo_follows_the_object_not_its_id():
    first = [{"role": "user", "content": "one"}]
    assert PLAIN(first) == json.dumps(first)
    second = [{"role": "user", "content": "two"}]
    assert PLAIN(second) == json.dumps(second)
    assert PLAIN(first) == json.dumps(first)


def test_litellm_gets_copies_of_what_calls_share():
    """Seats share their messages and a step its response format: a provider adapter inside
    litellm that rewrites what it is given must not change what the next call sends."""
    import asyncio
    from types import SimpleNamespace

    from runner.llm.spec import build_spec
    from runner.llm.transport import LiteLLMTransport

    async def rewriting(**kwargs: Any) -> Any:
        kwargs["messages"][0]["content"] = "rewritten"
        kwargs["response_format"]["json_schema"]["schema"]["properties"].clear()
        raise RuntimeError("stop here")

    transport = LiteLLMTransport()
    transport._litellm = SimpleNamespace(acompletion=rewriting)
    messages = [{"role": "user", "content": "shared"}]
    schema = {"type": "object", "properties": {"verdict": {"type": "string"}}}
    wanted = response_format("json_schema", schema)
    spec = build_spec("m", {"model": "openai/m", "api_base": "http://127.0.0.1:9/v1", "transport": "litellm"})
    try:
        asyncio.run(transport.complete(spec, messages, {"response_format": wanted}))
    except Exception:  # noqa: BLE001 - the fake litellm stops every call; what it changed is the point
        pass
    assert messages == [{"role": "user", "content": "shared"}]
    assert wanted["json_schema"]["schema"]["properties"] == {"verdict": {"type": "string"}}
    assert schema["properties"] == {"verdict": {"type": "string"}}


def test_equal_values_that_are_not_the_same_json_make_their_own_keys():
    # 1, 1.0 and True (and 0.0 and -0.0) are equal and hash alike, but are not the same JSON:
    # the text made once a seat must not be reused across them.
    made = set()
    for value in (1, 1.0, True, 0, 0.0, -0.0, False, "1"):
        for _ in range(2):                       # the second time from what was made once
            kw = dict(model="m", api_base="http://h/v1", messages=[{"role": "user", "content": "x"}],
                      sampling={"temperature": value, "seed": value}, response_format=None, output_schema=None,
                      sample=value if not isinstance(value, str) else 0, extra=None, cache_as=None)
            assert request_key(**kw) == whole_key(**kw), value
        made.add(request_key(**kw))
    assert len(made) == 8
