"""`repeat: N` and `confidence: true` on `llm` and `jury`: N samples per model, the value most
of them give and its stability; the probability the model gave that value, read from the
tokens of the value itself, absent where the server sends none; cached with the answer."""

from __future__ import annotations

import json
import math

import pytest

from fakellm import Reply
from helpers import run, write_json
from jurors import token_logprobs

VERDICT_SCHEMA = {"type": "object", "required": ["verdict", "reason"],
                  "properties": {"verdict": {"enum": ["VALID", "UNSUPPORTED"]}, "reason": {"type": "string"}}}
MANY = "limits: {concurrency: 16}"


@pytest.fixture
def env(fake_llm, monkeypatch):
    monkeypatch.setenv("FAKE_URL", fake_llm.url)
    return fake_llm


def pipeline(project, llm_with="", jury_with=""):
    project.schema("v.schema.json", VERDICT_SCHEMA)
    return project.pipeline(f"""
        version: 1
        name: sampled
        env: [FAKE_URL]
        models:
          a: {{model: openai/judge-a, api_base: "{{{{ env.FAKE_URL }}}}", {MANY}}}
          b: {{model: openai/judge-b, api_base: "{{{{ env.FAKE_URL }}}}", {MANY}}}
          c: {{model: openai/judge-c, api_base: "{{{{ env.FAKE_URL }}}}", {MANY}}}
        steps:
          - id: one
            uses: llm
            with: {{model: a, prompt: "Alone {{{{ item.n }}}}", output_schema: v.schema.json {llm_with}}}
          - id: jury
            uses: jury
            with: {{models: [a, b, c], prompt: "Together {{{{ item.n }}}}", output_schema: v.schema.json,
                    vote: {{field: verdict}} {jury_with}}}
        output:
          one: "{{{{ steps.one }}}}"
          jury: "{{{{ steps.jury }}}}"
        summary: {{count_by: jury.verdict}}
        """)


def answer(verdict, reason="because"):
    return json.dumps({"verdict": verdict, "reason": reason})


def test_repeat_takes_the_value_most_samples_give_and_its_stability(project, env):
    env.script(answer("VALID"), answer("VALID"), answer("UNSUPPORTED"), model="judge-a", contains="Alone",
               repeat_last=False)
    for model, verdicts in {"judge-a": ("VALID",) * 3, "judge-b": ("VALID", "UNSUPPORTED", "VALID"),
                            "judge-c": ("UNSUPPORTED",) * 3}.items():
        env.script(*(answer(v) for v in verdicts), model=model, contains="Together", repeat_last=False)
    items = write_json(project.root / "in.json", [{"n": 1}])
    path = pipeline(project, llm_with=", repeat: 3, temperature: 0.7, field: verdict",
                    jury_with=", repeat: 3, temperature: 0.7")
    [result] = run(path, items).results
    one, jury = result["one"], result["jury"]
    assert one["output"]["verdict"] == "VALID" and one["stability"] == 0.6667
    assert sorted(one["samples"]) == ["UNSUPPORTED", "VALID", "VALID"]
    assert "confidence" not in one                       # not asked
    assert jury["verdict"] == "VALID" and jury["reason"].startswith("Majority (2/3): VALID")
    by_seat = {v["model"]: v for v in jury["votes"]}
    assert by_seat["a"]["stability"] == 1.0 and by_seat["b"]["stability"] == 0.6667 and by_seat["c"]["value"] == \
        "UNSUPPORTED"
    assert jury["stability"] == round(8 / 9, 4)
    # Each sample is its own request, each its own cached answer: a rerun sends nothing.
    assert len(env.requests) == 12
    assert [r["jury"]["stability"] for r in run(path, items, out="again").results] == [round(8 / 9, 4)]
    assert len(env.requests) == 12


def test_samples_that_tie_give_no_value_and_say_so(project, env):
    env.script(answer("VALID"), answer("UNSUPPORTED"), model="judge-a", contains="Alone", repeat_last=False)
    env.answer_json({"verdict": "VALID", "reason": "r"})
    items = write_json(project.root / "in.json", [{"n": 1}])
    [result] = run(pipeline(project, llm_with=", repeat: 2, temperature: 0.9, field: verdict"), items).results
    assert "its 2 samples tie (1 UNSUPPORTED, 1 VALID): no value" in result["error"]


def test_confidence_is_the_probability_of_the_value_tokens_not_of_an_earlier_mention(project, env):
    # The reason says VALID first, with another probability (DeepEval's #3000/#3060: the
    # first matching token is the wrong one); the key's own token is unlikely too.
    text = json.dumps({"reason": "VALID as quoted", "verdict": "VALID"})
    tokens = token_logprobs(text, {"verdict": 0.8, "reason": 0.3})
    for token in tokens:
        if token["token"] == "verdict":
            token["logprob"] = math.log(0.01)
    env.script(Reply(text, logprobs=tokens), model="judge-a")
    env.script(Reply(text, logprobs=token_logprobs(text, {"verdict": 0.6})), model="judge-b")
    env.answer_json({"verdict": "UNSUPPORTED", "reason": "no"}, model="judge-c")
    items = write_json(project.root / "in.json", [{"n": 1}])
    path = pipeline(project, llm_with=", confidence: true, field: verdict", jury_with=", confidence: true")
    [result] = run(path, items).results
    assert result["one"]["confidence"] == 0.8
    by_seat = {v["model"]: v for v in result["jury"]["votes"]}
    assert (by_seat["a"]["confidence"], by_seat["b"]["confidence"]) == (0.8, 0.6)
    assert by_seat["c"]["confidence"] == 0.99            # each token of the fake's answer at 0.99
    assert result["jury"]["confidence"] == 0.7           # the votes the verdict rests on: a and b
    asked = [r.body for r in env.requests]
    assert all(b["logprobs"] is True and b["top_logprobs"] == 1 for b in asked)
    # Cached with the answer: the rerun reads the same confidence without a request.
    again = run(path, items, out="again").results[0]
    assert again["one"]["confidence"] == 0.8 and again["jury"]["confidence"] == 0.7
    assert len(env.requests) == len(asked)


def test_confidence_is_absent_where_the_server_sends_no_token_probabilities(project, env):
    env.logprobs = False
    env.answer_json({"verdict": "VALID", "reason": "r"})
    items = write_json(project.root / "in.json", [{"n": 1}])
    [result] = run(pipeline(project, llm_with=", confidence: true, field: verdict",
                            jury_with=", confidence: true"), items).results
    assert result["one"]["confidence"] is None and result["jury"]["confidence"] is None
    assert [v["confidence"] for v in result["jury"]["votes"]] == [None, None, None]


def test_asking_for_token_probabilities_is_its_own_cache_entry(project, env):
    env.answer_json({"verdict": "VALID", "reason": "r"})
    items = write_json(project.root / "in.json", [{"n": 1}])
    run(pipeline(project), items)
    plain = len(env.requests)
    assert all("logprobs" not in r.body for r in env.requests)
    [result] = run(pipeline(project, llm_with=", confidence: true, field: verdict"), items, out="asked").results
    assert result["one"]["confidence"] == 0.99
    assert len(env.requests) == plain + 1               # the llm step asked again, the jury did not


def test_a_text_answer_is_the_value_of_its_samples(project, env):
    env.script("yes", "yes", "no", model="judge-a", repeat_last=False)
    path = project.pipeline("""
        version: 1
        name: text
        env: [FAKE_URL]
        models: {a: {model: openai/judge-a, api_base: "{{ env.FAKE_URL }}", limits: {concurrency: 4}}}
        steps:
          - {id: ask, uses: llm, with: {model: a, prompt: "Yes or no?", repeat: 3, temperature: 1, confidence: true}}
        output: {said: "{{ steps.ask.output }}", stability: "{{ steps.ask.stability }}",
                 confidence: "{{ steps.ask.confidence }}"}
        """)
    [result] = run(path, records=["q=1"]).results
    assert (result["said"], result["stability"], result["confidence"]) == ("yes", 0.6667, 0.99)


JURY = "{id: jury, uses: jury, with: {models: [a], prompt: p, output_schema: v.schema.json, vote: {field: verdict}}}"


@pytest.mark.parametrize(("step", "problem"), [
    ("{id: x, uses: llm, with: {model: a, prompt: p, output_schema: v.schema.json, repeat: 3, temperature: 0.5}}",
     "steps[0].with.repeat: the answer is JSON: name the answer field"),
    ("{id: x, uses: llm, with: {model: a, prompt: p, output_schema: v.schema.json, confidence: true, field: verdit}}",
     "'verdit' is not a property of the answer schema. Did you mean 'verdict'?"),
    ("{id: x, uses: llm, with: {model: a, prompt: p, repeat: 3, temperature: 0.5, field: verdict}}",
     "steps[0].with.field: a text answer has no fields"),
    ("{id: x, uses: jury, with: {models: [a], prompt: p, output_schema: v.schema.json, vote: {field: verdict}, "
     "repeat: 5, temperature: 0}}",
     "steps[0].with.repeat: 5 samples at temperature 0 are one answer drawn 5 times"),
    ("{id: x, uses: llm, with: {model: a, prompt: p, repeat: 0}}", "steps[0].with.repeat"),
    *((JURY + ", {id: v, uses: decide, with: {rules: [" + rule + "]}}", problem) for rule, problem in (
        ("{min_confidence: {jury: 0.8}, verdict: x}", "step 'jury' gives no confidence: add `confidence: true`"),
        ("{min_confidence: {juri: 0.8}, verdict: x}", "no step has id 'juri'"),
        ("{min_confidence: {jury: 1.5}, verdict: x}", "steps[1].with.rules[0].min_confidence.jury"))),
])
def test_repeat_confidence_and_min_confidence_that_cannot_work_are_refused(project, cli, step, problem):
    project.schema("v.schema.json", VERDICT_SCHEMA)
    path = project.pipeline(f"""
        version: 1
        name: bad
        models: {{a: {{model: openai/m, api_base: "http://127.0.0.1:9/v1"}}}}
        steps: [{step}]
        """)
    result = cli("validate", str(path))
    assert result.exit_code == 2 and problem in result.output, result.output
    assert "pipelines/p.yaml:" in result.output


@pytest.mark.parametrize("way", ["batch", "streamed", pytest.param(
    "litellm", marks=pytest.mark.xdist_group("litellm"))])      # litellm imported by one worker only
def test_repeat_and_confidence_read_the_same_from_a_batch_a_stream_and_litellm(project, env, way):
    """The same answers, asked live (JSON), in a provider batch, streamed by a local server
    (llama-cpp-python's personality) or through litellm: the same values, stability and confidence."""
    text = json.dumps({"verdict": "VALID", "reason": "r"})
    env.script(Reply(text, logprobs=token_logprobs(text, {"verdict": 0.7})), model="judge-a")
    env.script(Reply(text, logprobs=token_logprobs(text, {"verdict": 0.9})), model="judge-b")
    env.answer_json({"verdict": "UNSUPPORTED", "reason": "no"}, model="judge-c")
    items = write_json(project.root / "in.json", [{"n": 1}, {"n": 2}])
    path = pipeline(project, llm_with=", repeat: 2, temperature: 0.5, field: verdict, confidence: true",
                    jury_with=", repeat: 2, temperature: 0.5, confidence: true")
    live = [(r["one"], r["jury"]) for r in run(path, items, out="live").results]
    options = {"batch": True} if way == "batch" else {}
    overrides = [f"models.{m}.{key}" for m in "abc" for key in
                 {"batch": ["batch_poll_seconds=0.02"], "litellm": ["transport=litellm"], "streamed": []}[way]]
    if way == "streamed":
        env.personality = "llama-cpp-python"
    other = run(path, items, out=way, no_cache=True, overrides=overrides, **options).results
    if way == "batch":
        assert env.batches.created() and all(b.status == "completed" for b in env.batches.created())
    if way == "streamed":
        assert env.streamed > 0
    for (one, jury), result in zip(live, other):
        assert (result["one"]["confidence"], result["one"]["stability"]) == (one["confidence"], one["stability"]) \
            == (0.7, 1.0)
        assert [(v["value"], v["confidence"], v["stability"]) for v in result["jury"]["votes"]] == \
            [(v["value"], v["confidence"], v["stability"]) for v in jury["votes"]] == \
            [("VALID", 0.7, 1.0), ("VALID", 0.9, 1.0), ("UNSUPPORTED", 0.99, 1.0)]
        assert result["jury"]["confidence"] == jury["confidence"] == 0.8


def confident_pipeline(project, floor="0.75"):
    project.schema("v.schema.json", VERDICT_SCHEMA)
    return project.pipeline(f"""
        version: 1
        name: gated
        env: [FAKE_URL]
        params: {{floor: {floor}}}
        models:
          a: {{model: openai/judge-a, api_base: "{{{{ env.FAKE_URL }}}}", {MANY}}}
          b: {{model: openai/judge-b, api_base: "{{{{ env.FAKE_URL }}}}", {MANY}}}
        steps:
          - id: jury
            uses: jury
            with: {{models: [a, b], prompt: "Judge {{{{ item.n }}}}", output_schema: v.schema.json,
                    vote: {{field: verdict}}, confidence: true}}
          - id: verdict
            uses: decide
            with:
              rules:
                - {{min_confidence: {{jury: "{{{{ params.floor }}}}"}}, verdict: "{{{{ steps.jury.verdict }}}}"}}
                - {{verdict: NEEDS_REVIEW}}
        output: {{verdict: "{{{{ steps.verdict.verdict }}}}", confidence: "{{{{ steps.jury.confidence }}}}"}}
        summary: {{count_by: verdict}}
        """)


def test_min_confidence_lets_a_rule_match_only_when_the_verdict_is_sure_enough(project, env):
    for n, sure in ((1, 0.9), (2, 0.6)):
        text = answer("VALID")
        env.script(Reply(text, logprobs=token_logprobs(text, {"verdict": sure})), contains=f"Judge {n}")
    items = write_json(project.root / "in.json", [{"n": 1}, {"n": 2}])
    outcome = run(confident_pipeline(project), items)
    assert [(r["verdict"], r["confidence"]) for r in outcome.results] == [("VALID", 0.9), ("NEEDS_REVIEW", 0.6)]
    assert "run_warnings" not in outcome.summary


def test_min_confidence_is_not_met_without_token_probabilities_and_the_run_says_so(project, env):
    env.logprobs = False
    env.answer_json({"verdict": "VALID", "reason": "r"})
    items = write_json(project.root / "in.json", [{"n": 1}])
    outcome = run(confident_pipeline(project), items)
    assert outcome.results[0]["verdict"] == "NEEDS_REVIEW"
    [warning] = outcome.summary["run_warnings"]
    assert "rules[0].min_confidence: step 'jury' has no confidence for some items (the server sent no token " \
           "probabilities): the rule did not match them" in warning


def test_render_shows_the_token_probabilities_a_run_would_ask_for(project, env, cli):
    path = pipeline(project, llm_with=", confidence: true, field: verdict")
    write_json(project.root / "in.json", [{"n": 1}])
    shown = cli("render", str(path), "--input", "in.json")
    assert shown.exit_code == 0, shown.output
    [alone] = [line for line in shown.output.splitlines() if line.startswith("endpoint: ")]     # then it waits
    assert "sampling: logprobs=True, max_tokens=1024, top_logprobs=1;" in alone
