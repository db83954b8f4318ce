"""The grading steps and options OpenAI's graders need, usable by any pipeline: rows read in
namespaces (`input.namespaces`), `string_check`, `text_similarity` (scores checked against the
libraries that define them), `formula` (parsed, never eval'd), and an llm step's `messages`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helpers import run, write_json
from runner.pipeline.formula import FormulaError, evaluate
from runner.text.similarity import similarity


def _rows(project: Any, rows: list[dict[str, Any]]) -> Any:
    path = project.root / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_namespaces_name_each_field_of_a_row_and_an_absent_one_is_empty(project, cli):
    project.pipeline("""
        version: 1
        name: p
        input: {adapter: jsonl, namespaces: [item, sample]}
        steps:
          - {id: c, uses: compute, with: {q: "{{ item.q }}", out: "{{ sample.output_text | default('none') }}"}}
        output:
          q: "{{ steps.c.q }}"
          out: "{{ steps.c.out }}"
        """)
    rows = _rows(project, [{"item": {"q": "a"}, "sample": {"output_text": "x"}}, {"item": {"q": "b"}},
                           {"item": "not a mapping"}])
    assert cli("validate", "pipelines/p.yaml").exit_code == 0
    run(project.root / "pipelines/p.yaml", rows)
    results = project.results()
    assert [(r.get("q"), r.get("out")) for r in results[:2]] == [("a", "x"), ("b", "none")]
    assert "the record's 'item' is a str, not a mapping" in results[2]["error"]


def test_a_name_no_namespace_gives_is_refused_before_the_run(project, cli):
    project.pipeline("""
        version: 1
        name: p
        input: {adapter: jsonl, namespaces: [item]}
        steps:
          - {id: c, uses: compute, with: {out: "{{ sample.output_text }}"}}
        output: {out: "{{ steps.c.out }}"}
        """)
    result = cli("validate", "pipelines/p.yaml")
    assert result.exit_code == 2 and "sample" in result.output


@pytest.mark.parametrize(("operation", "text", "reference", "passed"), [
    ("eq", "Paris", "Paris", True), ("eq", "Paris", "paris", False),
    ("ne", "Paris", "paris", True), ("ne", "Paris", "Paris", False),
    ("like", "It is Paris.", "Paris", True), ("like", "It is paris.", "Paris", False),
    ("ilike", "It is PARIS.", "paris", True), ("ilike", "It is Lyon.", "paris", False),
    ("like", "Paris", "P%s", False),                  # no SQL wildcards: a contains test
])
def test_string_check_compares_as_openai_defines_each_operation(one_step, project, operation, text, reference,
                                                                 passed):
    step = (f"{{id: s, uses: string_check, with: {{input: '{{{{ item.t }}}}', reference: '{{{{ item.r }}}}', "
            f"operation: {operation}}}}}")
    one_step(step, [{"t": text, "r": reference}], output={"passed": "{{ steps.s.passed }}",
                                                         "score": "{{ steps.s.score }}"})
    [result] = project.results()
    assert (result["passed"], result["score"]) == (passed, 1 if passed else 0)


TEXT, REFERENCE = "the cat sat on the mat today", "the cat is on the mat"


def test_fuzzy_match_and_bleu_are_their_libraries_scores():
    import sacrebleu
    from rapidfuzz import fuzz
    assert similarity("fuzzy_match", TEXT, REFERENCE) == pytest.approx(fuzz.ratio(TEXT, REFERENCE) / 100)
    assert similarity("bleu", TEXT, REFERENCE) == pytest.approx(sacrebleu.sentence_bleu(TEXT, [REFERENCE]).score / 100)
    assert similarity("fuzzy_match", "abcd", "abcf") == pytest.approx(0.75)       # Indel: 2 of 8 characters
    assert similarity("bleu", "the cat sat on the mat", "the cat sat on the mat") == pytest.approx(1.0)


@pytest.mark.slow       # NLTK (GLEU, and rouge-score's stemmer) takes seconds to import
def test_gleu_and_rouge_are_their_libraries_scores():
    from nltk.translate.gleu_score import sentence_gleu
    from rouge_score import rouge_scorer
    assert similarity("gleu", TEXT, REFERENCE) == pytest.approx(sentence_gleu([REFERENCE.split()], TEXT.split()))
    for n, kind in [("1", "rouge1"), ("2", "rouge2"), ("3", "rouge3"), ("4", "rouge4"), ("5", "rouge5"),
                    ("l", "rougeL")]:
        expected = rouge_scorer.RougeScorer([kind]).score(REFERENCE, TEXT)[kind].fmeasure
        assert similarity(f"rouge_{n}", TEXT, REFERENCE) == pytest.approx(expected)
    assert similarity("rouge_1", "a b c d", "a b x y") == pytest.approx(0.5)      # 2 of 4 words each way
    assert similarity("rouge_l", "a b c", "a b c") == 1.0
    assert similarity("gleu", "a b", "c d") == 0.0


def test_text_similarity_step_scores_and_passes_at_its_threshold(one_step, project):
    step = ("{id: sim, uses: text_similarity, with: {input: '{{ item.t }}', reference: '{{ item.r }}', "
            "metric: fuzzy_match, threshold: 0.75}}")
    one_step(step, [{"t": "abcd", "r": "abcf"}, {"t": "abcd", "r": "wxyz"}],
             output={"score": "{{ steps.sim.score }}", "passed": "{{ steps.sim.passed }}"})
    assert [(r["score"], r["passed"]) for r in project.results()] == [(0.75, True), (0.0, False)]


def test_formula_is_arithmetic_over_names_only():
    assert evaluate("0.5 * a + 0.5 * b", {"a": 1, "b": 0.5}) == 0.75
    assert evaluate("max(a, b) - min(a, b) + abs(-1) + a ^ 2", {"a": 2, "b": True}) == 6.0
    for bad, says in [("__import__('os')", "only the functions"), ("a.real", "Attribute"), ("c + 1", "unknown name 'c'"),
                      ("'x'", "only numbers"), ("a if a else b", "IfExp"), ("[a][0]", "not allowed"),
                      ("2 ^ 100000", "exponent"), ("(a - 2) ^ 0.5", "complex number"),
                      ("a * 1e308 * 10", "gives inf, not a finite number"), ("a / (b - 2)", "with a=1, b=2")]:
        with pytest.raises(FormulaError, match=says):
            evaluate(bad, {"a": 1, "b": 2})


def test_formula_step_and_a_bad_formula_refused_before_the_run(one_step, project, cli):
    one_step("{id: f, uses: formula, with: {formula: '(a + b) / 2', values: {a: '{{ item.a }}', b: 1}, "
             "threshold: 0.8}}", [{"a": 0.5}, {"a": 1}],
             output={"value": "{{ steps.f.value }}", "passed": "{{ steps.f.passed }}"})
    assert [(r["value"], r["passed"]) for r in project.results()] == [(0.75, False), (1.0, True)]
    project.pipeline("""
        version: 1
        name: bad
        steps:
          - {id: f, uses: formula, with: {formula: "a + open(1)", values: {a: 1}}}
        output: {v: "{{ steps.f.value }}"}
        """, "bad.yaml")
    result = cli("validate", "pipelines/bad.yaml")
    assert result.exit_code == 2 and "only the functions" in result.output and "bad.yaml:4" in result.output


def test_a_formula_that_gives_no_real_number_says_what_it_gave_and_where(one_step, project, cli):
    """Finding: a complex result (a negative number to a fractional power) was reported as a
    "bad threshold"; the error names what the formula gave, on which values, at file:line:col."""
    one_step("{id: f, uses: formula, with: {formula: '(a - 1) ^ 0.5', values: {a: '{{ item.a }}'}, threshold: 0.5}}",
             [{"a": 0}, {"a": 2}], output={"value": "{{ steps.f.value }}"})
    bad, good = project.results()
    assert good["value"] == 1.0
    assert "complex number" in bad["error"] and "a=0" in bad["error"], bad["error"]
    assert "p.yaml:" in bad["error"] and "threshold" not in bad["error"], bad["error"]


@pytest.mark.parametrize(("formula", "says"), [("min(a)", "min() takes 2 or more argument(s), not 1"),
                                               ("floor(a, 2)", "floor() takes 1 argument(s), not 2")])
def test_a_function_given_the_wrong_number_of_arguments_is_refused_before_the_run(project, cli, formula, says):
    project.pipeline(f"""
        version: 1
        name: bad
        steps:
          - {{id: f, uses: formula, with: {{formula: "{formula}", values: {{a: 1}}, threshold: 0.5}}}}
        output: {{v: "{{{{ steps.f.value }}}}"}}
        """, "bad.yaml")
    result = cli("validate", "pipelines/bad.yaml")
    assert result.exit_code == 2 and says in result.output and "bad.yaml:4" in result.output, result.output
    assert "threshold" not in result.output


def test_llm_messages_keep_their_roles_and_render_their_templates(project, scripted_llm, cli):
    project.prompt("dev.j2", "Grade {{ item.q }}.")
    project.pipeline("""
        version: 1
        name: p
        models: {m: {model: scripted/m}}
        steps:
          - id: ask
            uses: llm
            with:
              model: m
              messages:
                - {role: developer, content: dev.j2}
                - {role: assistant, content: "Earlier: {{ item.q | upper }}"}
                - {role: user, content: "Answer for {{ item.q }}"}
        output: {a: "{{ steps.ask.output }}"}
        """)
    assert cli("validate", "pipelines/p.yaml").exit_code == 0
    run(project.root / "pipelines/p.yaml", write_json(project.root / "in.json", [{"q": "x"}]))
    [request] = scripted_llm.requests
    assert [(m["role"], m["content"]) for m in request.messages] == [
        ("developer", "Grade x."), ("assistant", "Earlier: X"), ("user", "Answer for x")]


def test_llm_message_naming_a_missing_prompt_file_is_refused(project, cli):
    project.pipeline("""
        version: 1
        name: p
        models: {m: {model: scripted/m}}
        steps:
          - {id: ask, uses: llm, with: {model: m, messages: [{role: user, content: missing.j2}]}}
        output: {a: "{{ steps.ask.output }}"}
        """)
    result = cli("validate", "pipelines/p.yaml")
    assert result.exit_code == 2 and "missing.j2" in result.output
