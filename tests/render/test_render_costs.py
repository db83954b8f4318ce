"""`runner render` ends with what a run would cost: calls, cached calls, estimated tokens and
cost per model (litellm's price table read as data), and prints how each call is asked."""

from __future__ import annotations

import json
import re

import pytest

from helpers import write_json
from runner.llm.client.prices import price_of

PIPELINE = """
    version: 1
    name: rc
    env: [FAKE_URL]
    models:
      local: {model: openai/local-model, api_base: "{{ env.FAKE_URL }}", temperature: 0, max_tokens: 100}
      paid: {model: gpt-4o-mini, api_base: "{{ env.FAKE_URL }}", structured_output: json_object}
    steps:
      - id: jury
        uses: jury
        with: {models: [local, paid], prompt: "Is {{ item.claim }} true? Answer in JSON.",
               output_schema: v.schema.json, vote: {field: verdict}}
    output: {verdict: "{{ steps.jury.verdict }}"}
    """


def test_render_estimates_calls_tokens_and_cost(project, fake_llm, cli):
    """(That a render, its cost included, never imports litellm: tests/test_lazy_imports.py.)"""
    project.schema("v.schema.json", {"type": "object", "properties": {"verdict": {"type": "string"}}})
    path = project.pipeline(PIPELINE)
    source = write_json(project.root / "in.json", [{"claim": "the sky is blue " * 50}, {"claim": "grass"}])
    done = cli("render", str(path), "--input", str(source), env={"FAKE_URL": fake_llm.url})
    assert done.exit_code == 0, done.output
    out = done.stdout
    assert fake_llm.requests == []
    # the mode this endpoint uses (auto starts at json_schema), and the configured one when they differ
    assert (f"endpoint: {fake_llm.url}; sampling: max_tokens=100, temperature=0.0; "
            "structured output: json_schema (configured auto)") in out
    assert f"endpoint: {fake_llm.url}; sampling: max_tokens=1024; structured output: json_object\n" in out
    lines = out.splitlines()
    local = next(line for line in lines if line.startswith("  local (openai/local-model): "))
    assert local.startswith("  local (openai/local-model): 2 call(s), 0 cached, est. prompt tokens ")
    assert "est. completion tokens 200 (100 per uncached call: max_tokens, an upper bound)" in local
    assert local.endswith("no price in litellm's table (a local model costs nothing)")
    paid = next(line for line in lines if line.startswith("  paid (gpt-4o-mini): "))
    prompt_tokens = int(re.search(r"est\. prompt tokens (\d+)", paid).group(1))
    price = price_of("gpt-4o-mini")
    assert price is not None and prompt_tokens > 200          # the long claim counts
    expected = price.cost(prompt_tokens, 2 * 1024)                # the default max_tokens, an upper bound
    assert f"est. cost ${expected:.4f} for the 2 uncached call(s)" in paid
    total = lines[-1]
    assert total.startswith("LLM calls: 4 (0 cached), est. prompt tokens: ") and total.endswith(f"${expected:.4f}")


@pytest.mark.xdist_group("litellm")      # its run sends the paid seat through litellm: imported by one worker only
def test_cached_answers_teach_the_completion_estimate(project, fake_llm, cli):
    project.schema("v.schema.json", {"type": "object", "properties": {"verdict": {"type": "string"}}})
    path = project.pipeline(PIPELINE)
    fake_llm.script(json.dumps({"verdict": "yes"}))
    env = {"FAKE_URL": fake_llm.url}
    assert cli("run", str(path), "--record", "claim=grass", "--quiet", env=env).exit_code == 0
    out = cli("render", str(path), "--record", "claim=grass", env=env).stdout
    assert out.count("[cached]") == 2
    assert out.rstrip().splitlines()[-1].startswith("LLM calls: 2 (2 cached)")
    assert out.rstrip().endswith("est. cost: $0.0000")


def test_62_5_a_hosted_model_without_a_price_is_an_unknown_price_never_a_free_local_model(project, cli):
    path = project.pipeline("""
        version: 1
        name: hosted
        models:
          judge: {model: openai/judge-a, api_base: "https://api.openai.com/v1", max_tokens: 10}
        steps:
          - {id: ask, uses: llm, with: {model: judge, prompt: "Is {{ item.claim }} true?"}}
        output: {answer: "{{ steps.ask.raw }}"}
        """)
    shown = cli("render", str(path), "--record", "claim=grass")
    assert shown.exit_code == 0, shown.output
    assert "a local model costs nothing" not in shown.output
    line = next(line for line in shown.output.splitlines() if line.startswith("  judge (openai/judge-a): "))
    assert line.endswith("unknown price (not in litellm's table; not counted in the est. cost)")
    assert shown.output.rstrip().endswith("est. cost: $0.0000 (+ an unknown price for judge)")


def test_62_5_a_cache_as_answer_from_another_endpoint_says_where_it_came_from(project, cli, scripted_llm):
    from runner.testing import Reply
    scripted_llm.script(Reply("yes"))
    path = project.pipeline("""
        version: 1
        name: borrowed
        env: [LOCAL_URL]
        models:
          local: {model: scripted/m, api_base: "{{ env.LOCAL_URL }}", cache_as: local, retries: 0}
        steps:
          - {id: ask, uses: llm, with: {model: local, prompt: "Is {{ item.claim }} true?"}}
        output: {answer: "{{ steps.ask.raw }}"}
        """)
    args = ["run", str(path), "--record", "claim=grass", "--quiet"]
    first = cli(*args, "--out", "a", env={"LOCAL_URL": "http://one.example/v1"})
    assert first.exit_code == 0, first.output
    again = cli(*args, "--out", "b", env={"LOCAL_URL": "http://one.example/v1"})
    assert "came from the cache_as" not in again.output                 # the same endpoint made it
    moved = cli(*args, "--out", "c", env={"LOCAL_URL": "http://two.example/v1"})
    assert ("1 answer(s) of local came from the cache_as 'local' cache, made by scripted/m at "
            "http://one.example/v1; --no-cache-as keeps each endpoint's answers apart") in moved.output
    assert "0 sent, 1 cached" in moved.output
    apart = cli(*args, "--out", "d", "--no-cache-as", env={"LOCAL_URL": "http://two.example/v1"})
    assert "1 sent, 0 cached" in apart.output and "came from the cache_as" not in apart.output
