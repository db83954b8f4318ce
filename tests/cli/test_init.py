"""`runner init NAME`: the scaffolded judge validates, renders, runs against a model and is scored by eval."""

from __future__ import annotations

import json

from fakellm import Reply

FILES = ["pipelines/qa_judge.yaml", "prompts/qa_judge.j2", "schemas/qa_judge.schema.json",
         "examples/qa_judge/items.csv", "examples/qa_judge/labels.csv"]


def test_init_then_validate_render_run_and_eval(project, cli, fake_llm):
    made = cli("init", "qa_judge")
    assert made.exit_code == 0, made.output
    assert [line.removeprefix("created ") for line in made.output.splitlines()[:5]] == FILES
    assert "  runner validate pipelines/qa_judge.yaml\n" in made.output
    assert all((project.root / name).is_file() for name in FILES)

    checked = cli("validate", "pipelines/qa_judge.yaml")
    assert checked.exit_code == 0 and checked.output == "pipelines/qa_judge.yaml: ok (1 steps)\n"
    rendered = cli("render", "pipelines/qa_judge.yaml", "--input", "examples/qa_judge/items.csv")
    assert rendered.exit_code == 0, rendered.output
    assert rendered.output.count("--- LLM call: model judge") == 5
    assert "Question: Which planet is closest to the Sun, and how long is its year?" in rendered.output

    scores = {"capital of France": 1, "spider": 0, "Pride": 1, "boiling": 0.9, "closest": 0.2}
    for words, score in scores.items():
        fake_llm.script(Reply(json.dumps({"score": score, "reason": "checked"})), contains=words)
    model = f"judge=openai/judge@{fake_llm.url}"
    ran = cli("run", "pipelines/qa_judge.yaml", "--input", "examples/qa_judge/items.csv", "--model", model,
              "--out", "out", "--quiet")
    assert ran.exit_code == 0, ran.output
    assert [(r["id"], r["verdict"]) for r in project.results()] == [
        ("1", "PASS"), ("2", "FAIL"), ("3", "PASS"), ("4", "PASS"), ("5", "FAIL")]
    assert project.summary()["pass_rate"] == 0.6
    scored = cli("eval", "out", "--labels", "examples/qa_judge/labels.csv", "--key", "id", "--truth", "label")
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
