"""`runner import openai-evals`: an OpenAI eval's graders as a pipeline that reads the Evals
JSONL rows unchanged and gives the pass/fail per row and per grader that the Evals give."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rapidfuzz import fuzz

from helpers import run

LABEL = {"type": "label_model", "name": "correctness", "model": "gpt-4o-mini",
         "input": [{"role": "developer", "content": "Label the answer correct or incorrect."},
                   {"role": "user", "content": "Question: {{ item.question }}\nAnswer: {{ sample.output_text }}"}],
         "labels": ["correct", "incorrect"], "passing_labels": ["correct"]}
CHECK = {"type": "string_check", "name": "mentions_answer", "input": "{{ sample.output_text }}",
         "reference": "{{ item.answer }}", "operation": "ilike"}
SCORE = {"type": "score_model", "name": "quality", "model": "o3-mini", "range": [1, 7], "pass_threshold": 5,
         "input": [{"role": "user", "content": "Score {{ sample.output_text }} from 1 to 7."}]}
SIMILAR = {"type": "text_similarity", "name": "close", "input": "{{ sample.output_text }}",
           "reference": "{{ item.answer }}", "evaluation_metric": "fuzzy_match", "pass_threshold": 0.6}
EVAL = {"object": "eval", "name": "QA check",
        "data_source_config": {"type": "custom", "include_sample_schema": True,
                               "item_schema": {"type": "object", "properties": {"question": {"type": "string"}}}},
        "testing_criteria": [LABEL, CHECK, SIMILAR]}
ROWS = [{"item": {"question": "Capital of France?", "answer": "Paris"}, "sample": {"output_text": "Paris"}},
        {"item": {"question": "Legs of a spider?", "answer": "eight"}, "sample": {"output_text": "Eight legs."}},
        {"item": {"question": "Author of Emma?", "answer": "Jane Austen"}, "sample": {"output_text": "Dickens"}}]
LABELS = {"Paris": "correct", "Eight legs.": "correct", "Dickens": "incorrect"}     # what the grader model says


def _write(project: Any, name: str, value: Any) -> Path:
    path = project.root / name
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def _rows(project: Any, rows: list[dict[str, Any]]) -> Path:
    path = project.root / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _evals_semantics(row: dict[str, Any]) -> dict[str, bool]:
    """What OpenAI's graders give a row (label_model: a passing label; string_check ilike: the
    output contains the reference in any case; text_similarity: rapidfuzz score >= pass_threshold)."""
    output, answer = row["sample"]["output_text"], row["item"]["answer"]
    return {"correctness": LABELS[output] in LABEL["passing_labels"],
            "mentions_answer": answer.lower() in output.lower(),
            "close": fuzz.ratio(output, answer) / 100 >= SIMILAR["pass_threshold"]}


def test_an_imported_eval_gives_the_evals_pass_fail_per_row_and_grader(project, cli, scripted_llm):
    for output, label in LABELS.items():
        scripted_llm.answer_json({"label": label, "reason": "as scripted"}, contains=f"Answer: {output}")
    result = cli("import", "openai-evals", str(_write(project, "eval.json", EVAL)))
    assert result.exit_code == 0, result.output
    assert "created pipelines/qa_check.yaml" in result.output and "runner validate pipelines/qa_check.yaml" in result.output
    assert "--model correctness=" in result.output
    ran = cli("run", "pipelines/qa_check.yaml", "--input", str(_rows(project, ROWS)), "--out", "out", "--quiet",
              "--model", "correctness=scripted/correctness")
    assert ran.exit_code == 0, ran.output
    expected = [_evals_semantics(row) for row in ROWS]
    assert expected == [{"correctness": True, "mentions_answer": True, "close": True},
                        {"correctness": True, "mentions_answer": True, "close": False},
                        {"correctness": False, "mentions_answer": False, "close": False}]
    results = project.results()
    assert [{grader: r[grader]["passed"] for grader in expected[0]} for r in results] == expected
    assert [r["passed"] for r in results] == [all(e.values()) for e in expected]
    assert [r["correctness"]["label"] for r in results] == ["correct", "correct", "incorrect"]
    summary = project.summary()
    assert (summary["correctness"], summary["mentions_answer"], summary["close"], summary["passed"]) == (
        round(2 / 3, 4), round(2 / 3, 4), round(1 / 3, 4), round(1 / 3, 4))
    # the gate is every grader passing, as the eval's testing criteria: 1 of 3 rows, not correctness's 2 of 3
    gated = cli("run", "pipelines/qa_check.yaml", "--input", str(project.root / "rows.jsonl"), "--out", "gated",
                "--quiet", "--model", "correctness=scripted/correctness", "--fail-under", "0.5")
    assert gated.exit_code == 1 and "passed" in gated.output, gated.output
    first = scripted_llm.requests[0]
    assert [m["role"] for m in first.messages] == ["developer", "user"]     # roles kept
    assert first.body["response_format"]["json_schema"]["schema"]["properties"]["label"]["enum"] == [
        "correct", "incorrect"]


def test_a_cosine_grader_embeds_both_texts_with_an_embeddings_model(project, cli, fake_llm):
    """OpenAI's cosine: the cosine similarity of the output's and the reference's embeddings, here
    from the fake server's /v1/embeddings (the model repointed by --model), checked against numpy."""
    vectors = {"Paris": [0.9, 0.1, 0.2], "Eight legs.": [0.1, 0.8, 0.3], "eight": [0.2, 0.9, 0.1],
               "Dickens": [0.7, -0.2, 0.1], "Jane Austen": [-0.1, 0.3, 0.9]}
    fake_llm.answer_embeddings(vectors)
    grader = {**SIMILAR, "name": "meaning", "evaluation_metric": "cosine", "pass_threshold": 0.9}
    source = _write(project, "cos.json", {"name": "cos", "testing_criteria": [grader]})
    result = cli("import", "openai-evals", str(source))
    assert result.exit_code == 0, result.output
    assert "--model meaning=" in result.output and "openai/text-embedding-3-small" in result.output
    written = (project.root / "pipelines/cos.yaml").read_text()
    assert "openai/text-embedding-3-small" in written and "metric: cosine" in written
    ran = cli("run", "pipelines/cos.yaml", "--input", str(_rows(project, ROWS)), "--out", "out", "--quiet",
              "--model", f"meaning=openai/embedder@{fake_llm.url}")
    assert ran.exit_code == 0, ran.output
    scores = []
    for row in ROWS:
        a, b = (np.array(vectors[text]) for text in (row["sample"]["output_text"], row["item"]["answer"]))
        scores.append(round(float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))), 6))
    results = project.results()
    assert [r["meaning"]["score"] for r in results] == scores
    assert [r["meaning"]["passed"] for r in results] == [s >= 0.9 for s in scores] == [True, True, False]
    assert [r.body["input"] for r in fake_llm.requests] and all(r.path == "/v1/embeddings" for r in fake_llm.requests)


def test_rows_without_a_sample_and_one_grader_object(project, cli):
    grader = {"type": "string_check", "name": "exact", "input": "{{ item.got }}", "reference": "{{ item.want }}",
              "operation": "eq"}
    assert cli("import", "openai-evals", str(_write(project, "exact.json", grader))).exit_code == 0
    run(project.root / "pipelines/exact.yaml", _rows(project, [{"item": {"got": "a", "want": "a"}},
                                                               {"item": {"got": "a", "want": "A"}}]))
    assert [r["passed"] for r in project.results()] == [True, False]


def test_score_model_keeps_range_threshold_and_sampling(project, cli, scripted_llm):
    grader = {"type": "score_model", "name": "quality", "model": "o3-mini", "range": [1, 7], "pass_threshold": 5,
              "sampling_params": {"temperature": 0.2, "max_completions_tokens": 300, "seed": 7, "top_p": 0.9},
              "input": [{"role": "system", "content": "Score 1 to 7."},
                        {"role": "user", "content": {"type": "input_text", "text": "{{ sample.output_text }}"}}]}
    scripted_llm.answer_json({"score": 6}, contains="good")
    scripted_llm.answer_json({"score": 2}, contains="bad")
    assert cli("import", "openai-evals", str(_write(project, "q.json", {"name": "q", "testing_criteria": [grader]}))
               ).exit_code == 0
    schema = json.loads((project.root / "schemas/q.quality.schema.json").read_text())
    assert schema["properties"]["score"] == {"type": "number", "minimum": 1, "maximum": 7}
    run(project.root / "pipelines/q.yaml", _rows(project, [{"item": {}, "sample": {"output_text": "good"}},
                                                           {"item": {}, "sample": {"output_text": "bad"}}]),
        overrides=["models.quality.model=scripted/q"])
    assert [(r["quality"]["score"], r["passed"]) for r in project.results()] == [(6, True), (2, False)]
    body = scripted_llm.requests[0].body
    assert (body["temperature"], body["max_tokens"], body["seed"], body["top_p"]) == (0.2, 300, 7, 0.9)


def test_multi_combines_its_graders_by_calculate_output(project, cli):
    multi = {"type": "multi", "name": "combined", "calculate_output": "0.5 * exact + 0.5 * fuzzy",
             "pass_threshold": 0.7,
             "graders": {"exact": {"type": "string_check", "name": "exact", "input": "{{ sample.output_text }}",
                                   "reference": "{{ item.answer }}", "operation": "eq"},
                         "fuzzy": {"type": "text_similarity", "name": "fuzzy", "input": "{{ sample.output_text }}",
                                   "reference": "{{ item.answer }}", "evaluation_metric": "fuzzy_match"}}}
    assert cli("import", "openai-evals", str(_write(project, "m.json", {"name": "m", "testing_criteria": [multi]}))
               ).exit_code == 0
    run(project.root / "pipelines/m.yaml", _rows(project, [{"item": {"answer": "abcd"}, "sample": {"output_text": "abcd"}},
                                                           {"item": {"answer": "abcd"}, "sample": {"output_text": "abcf"}}]))
    results = project.results()
    assert [(r["combined"]["score"], r["passed"]) for r in results] == [(1.0, True), (0.375, False)]   # 0.5 * 0.75
    assert "combined" in project.summary() and "combined_exact" not in project.summary()


PYTHON = {"type": "python", "name": "length", "pass_threshold": 0.5,
          "source": "def grade(sample, item):\n    return 1.0 if len(sample['output_text']) <= item['max'] else 0.0\n"}


def test_python_grader_only_with_allow_python_then_called_as_a_plugin_step(project, cli):
    path = _write(project, "py.json", {"name": "py", "testing_criteria": [PYTHON, CHECK]})
    refused = cli("import", "openai-evals", str(path))
    assert refused.exit_code == 2 and "testing_criteria[0]" in refused.output and "--allow-python" in refused.output
    assert not (project.root / "pipelines/py.yaml").exists() and not (project.root / "plugins").exists()
    assert cli("import", "openai-evals", str(path), "--allow-python").exit_code == 0
    assert "def grade(sample, item)" in (project.root / "plugins/py_length.py").read_text()
    try:
        run(project.root / "pipelines/py.yaml", _rows(project, [
            {"item": {"max": 5, "answer": "ab"}, "sample": {"output_text": "ab"}},
            {"item": {"max": 1, "answer": "ab"}, "sample": {"output_text": "ab"}}]))
    finally:          # the plug-in's step type, registered in this process: not for the tests after this one
        from runner.pipeline.step_catalog import STEPS
        STEPS.remove("py_length")
    assert [(r["length"]["score"], r["length"]["passed"], r["passed"]) for r in project.results()] == [
        (1.0, True, True), (0.0, False, False)]


@pytest.mark.parametrize(("grader", "where", "says"), [
    ({"type": "mystery", "name": "m"}, "testing_criteria[1]", "grader type 'mystery'"),
    ({**SIMILAR, "evaluation_metric": "meteor"}, "testing_criteria[1].evaluation_metric", "WordNet"),
    ({**SIMILAR, "evaluation_metric": "cosine_ish"}, "testing_criteria[1].evaluation_metric", "cosine)"),
    ({**LABEL, "input": [{"role": "user", "content": {"type": "input_image", "image_url": "{{ item.img }}"}}]},
     "testing_criteria[1].input[0].content", "input_image content is not text"),
    ({**SIMILAR, "pass_threshold": None}, "testing_criteria[1].pass_threshold", "needs pass_threshold"),
    ({"type": "multi", "name": "x", "pass_threshold": 1, "calculate_output": "__import__('os')",
      "graders": {"a": CHECK}}, "testing_criteria[1].calculate_output", "only the functions"),
    # values of the wrong JSON type: each was a TypeError (unhashable) traceback
    ({"type": {"a": 1}, "name": "m"}, "testing_criteria[1]", "grader type {'a': 1}"),
    ({**SIMILAR, "evaluation_metric": ["fuzzy_match"]}, "testing_criteria[1].evaluation_metric", "unknown metric"),
    ({**LABEL, "passing_labels": [{"label": "correct"}]}, "testing_criteria[1].passing_labels", "each one of labels"),
    # a range or threshold no score can meet: imported, validated, then every row errored or failed
    ({**SCORE, "range": [5, 1]}, "testing_criteria[1].range", "low below high"),
    ({**SCORE, "range": "1-7"}, "testing_criteria[1].range", "expected [low, high]"),
    ({**SCORE, "pass_threshold": 9}, "testing_criteria[1].pass_threshold", "above the range [1, 7]: no score"),
    ({**SIMILAR, "pass_threshold": "high"}, "testing_criteria[1].pass_threshold", "expected a number, got str"),
])
def test_what_cannot_be_imported_is_refused_with_its_json_path(project, cli, grader, where, says):
    path = _write(project, "e.json", {"name": "e", "testing_criteria": [CHECK, grader]})
    result = cli("import", "openai-evals", str(path))
    assert result.exit_code == 2 and f"{where}:" in result.output and says in result.output
    assert not (project.root / "pipelines/e.yaml").exists()


def test_skip_imports_the_rest_and_says_what_it_left_out(project, cli):
    path = _write(project, "e.json", {"name": "e", "testing_criteria": [CHECK, PYTHON, {"type": "mystery"}]})
    refused = cli("import", "openai-evals", str(path), "--skip", "python")
    assert refused.exit_code == 2 and "`--skip mystery` imports the rest" in refused.output
    result = cli("import", "openai-evals", str(path), "--skip", "python", "--skip", "mystery")
    assert result.exit_code == 0 and "skipped testing_criteria[1] (python: 'length')" in result.output
    assert "skipped testing_criteria[2] (mystery: '')" in result.output
    assert "length" not in (project.root / "pipelines/e.yaml").read_text()
    typo = cli("import", "openai-evals", str(path), "--skip", "pyton", "--name", "e3")
    assert typo.exit_code == 2 and "--skip pyton: no grader of that type" in typo.output


def test_a_data_source_that_generates_samples_is_refused(project, cli):
    path = _write(project, "e.json", {"name": "e", "testing_criteria": [CHECK], "data_source": {
        "type": "completions", "model": "gpt-4o", "input_messages": {"type": "template", "template": []}}})
    result = cli("import", "openai-evals", str(path))
    assert result.exit_code == 2 and "data_source (type 'completions')" in result.output


def test_import_writes_no_file_over_another_and_names_it(project, cli):
    path = _write(project, "e.json", {"name": "e", "testing_criteria": [CHECK]})
    assert cli("import", "openai-evals", str(path)).exit_code == 0
    again = cli("import", "openai-evals", str(path))
    assert again.exit_code == 2 and "pipelines/e.yaml already exists" in again.output
    assert cli("import", "openai-evals", str(path), "--name", "e2", "--out", "other").exit_code == 0
    assert (project.root / "other/pipelines/e2.yaml").is_file()


def test_a_null_range_is_the_default_and_a_threshold_below_the_range_imports(project, cli):
    """(review) `"range": null` (an export writing every field) was refused; a threshold below
    the range passes every score, as the eval says."""
    grader = {**SCORE, "range": None, "pass_threshold": 0.5}
    assert cli("import", "openai-evals", str(_write(project, "n.json", {"name": "n", "testing_criteria": [grader]}))
               ).exit_code == 0
    below = {**SCORE, "pass_threshold": 0}
    assert cli("import", "openai-evals", str(_write(project, "b.json", {"name": "b", "testing_criteria": [below]}))
               ).exit_code == 0
