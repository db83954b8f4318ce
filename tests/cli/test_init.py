"""`runner init NAME`: the scaffolded judge validates, renders, runs against a model and is scored by eval."""

from __future__ import annotations

import json
import shlex

from fakellm import Reply

FILES = ["pipelines/qa_judge.yaml", "prompts/qa_judge.j2", "schemas/qa_judge.schema.json",
         "examples/qa_judge/items.csv", "examples/qa_judge/labels.csv"]


def test_init_then_the_commands_it_prints_validate_render_run_and_eval(project, cli, fake_llm):
    made = cli("init", "qa_judge")
    assert made.exit_code == 0, made.output
    lines = made.output.splitlines()
    assert [line.removeprefix("created ") for line in lines[:5]] == FILES and lines[5] == "next:"
    assert all((project.root / name).is_file() for name in FILES)
    validate, render, run, evaluate = (shlex.split(line)[1:] for line in lines[6:10])

    checked = cli(*validate)
    assert checked.exit_code == 0 and checked.output == "pipelines/qa_judge.yaml: ok (1 steps)\n"
    rendered = cli(*render)
    assert rendered.exit_code == 0, rendered.output
    assert rendered.output.count("--- LLM call: model judge") == 1
    assert "Question: What is the capital of France?\nAnswer: Paris\n" in rendered.output
    everything = cli("render", "pipelines/qa_judge.yaml", "--input", "examples/qa_judge/items.csv")
    assert everything.output.count("--- LLM call: model judge") == 5
    assert "Question: Which planet is closest to the Sun, and how long is its year?" in everything.output

    scores = {"capital of France": 1, "spider": 0, "Pride": 1, "boiling": 0.9, "closest": 0.2}
    for words, score in scores.items():
        fake_llm.script(Reply(json.dumps({"score": score, "reason": "checked"})), contains=words)
    assert run[-1] == "judge=openai/local-model@http://localhost:1234/v1"
    ran = cli(*run[:-1], f"judge=openai/local-model@{fake_llm.url}", "--quiet")
    assert ran.exit_code == 0, ran.output
    assert "5 item(s) (PASS: 3, FAIL: 2); errors: 0" in ran.output
    scored = cli(*evaluate)
    assert scored.exit_code == 0, scored.output
    assert "scored 5 of 5 label(s) against 5 result(s)" in scored.output and "accuracy 1.0" in scored.output


def test_init_refuses_to_write_over_a_file(project, cli):
    (project.root / "prompts" / "qa_judge.j2").write_text("mine\n", encoding="utf-8")
    refused = cli("init", "qa_judge")
    assert refused.exit_code == 2
    assert refused.stderr.startswith("prompts/qa_judge.j2 already exists")
    assert not (project.root / "pipelines" / "qa_judge.yaml").exists()      # nothing written
    assert (project.root / "prompts" / "qa_judge.j2").read_text(encoding="utf-8") == "mine\n"


def test_init_refuses_a_name_that_is_not_one(project, cli):
    refused = cli("init", "../escape")
    assert refused.exit_code == 2 and "lowercase letters, digits and _" in refused.stderr
    assert not list((project.root / "pipelines").iterdir())
