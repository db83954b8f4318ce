"""Checks of what a pipeline means, before anything runs: `runner validate` and every run
refuse a judge that cannot do what its YAML says, with every problem located at once."""

from __future__ import annotations

import json
import re

import pytest

from runner.errors import ConfigError
from runner.pipeline.loader import load_pipeline

FAITHFUL = {"type": "object", "required": ["faithful", "reason"],
            "properties": {"faithful": {"type": "boolean"}, "reason": {"type": "string"},
                           "score": {"type": "number"}, "grade": {"enum": ["A", "B", "C"]}}}
LOCATED = re.compile(r"^pipelines/\S+\.yaml:\d+:\d+: \S+: .+; .+")


def summary_judge(project, vote="{field: faithful, method: mean}", rates="pass_rate: \"verdict == 'PASS'\"",
                  env_line="env: [JUDGE_BASE_URL]", api_base="{{ env.JUDGE_BASE_URL }}", name="judge.yaml"):
    """A 3-juror summary-faithfulness judge as a promptfoo user writes it from the docs."""
    project.schema("faithful.schema.json", FAITHFUL)
    project.prompt("faithful.j2", "Is this summary faithful to its source?\n{{ item.summary }}\n")
    return project.pipeline(f"""
        version: 1
        name: summaries
        {env_line}
        models:
          judge_a: {{model: openai/a, api_base: "{api_base}"}}
          judge_b: {{model: openai/b, api_base: "{api_base}"}}
          judge_c: {{model: openai/c, api_base: "{api_base}"}}
        steps:
          - id: jury
            uses: jury
            with:
              models: [judge_a, judge_b, judge_c]
              prompt: faithful.j2
              output_schema: faithful.schema.json
              vote: {vote}
          - id: verdict
            uses: decide
            with:
              rules:
                - {{when: "steps.jury.faithful", verdict: FAITHFUL}}
                - {{verdict: UNFAITHFUL}}
        output:
          verdict: "{{{{ steps.verdict.verdict }}}}"
        summary:
          count_by: verdict
          rates: {{{rates}}}
        """, name)


def problems_of(path, *sets):
    with pytest.raises(ConfigError) as caught:
        load_pipeline(path, list(sets))
    return [str(p) for p in caught.value.problems]


def test_validate_refuses_a_mean_vote_on_a_boolean_an_unset_variable_and_a_bare_name_rate(project, cli,
                                                                                              monkeypatch):
    """Finding 1 (validate said `ok (3 steps)`), 5 (the run made a folder and errored every
    item) and 6 (the bare-name rate passed validate): three located messages, each with its fix."""
    monkeypatch.delenv("JUDGE_BASE_URL", raising=False)
    path = summary_judge(project)
    result = cli("validate", str(path))
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 3, result.output
    assert all(LOCATED.match(line) for line in lines), lines
    vote, env, rate = sorted(lines, key=lambda line: ("vote" not in line, "env" not in line))
    assert vote.startswith("pipelines/judge.yaml:15:39: steps[0].with.vote.method: ")
    assert "'mean' needs numbers" in vote and "'faithful' is boolean" in vote and "method: majority" in vote
    assert env.startswith("pipelines/judge.yaml:5:40: models.judge_a.api_base: ") and "default(" in env
    assert env.count("JUDGE_BASE_URL is not set") == 1 and env.count("pipelines/judge.yaml") == 1
    assert rate.startswith("pipelines/judge.yaml:26:22: summary.rates.pass_rate: ")
    assert "'verdict'" in rate and "result.verdict" in rate


def test_a_run_of_a_pipeline_needing_an_unset_variable_writes_nothing(project, cli, monkeypatch):
    """Finding 5: refused before the run (exit 2), no run folder, the location said once."""
    monkeypatch.delenv("JUDGE_BASE_URL", raising=False)
    path = summary_judge(project, vote="{field: faithful, method: majority}",
                         rates="pass_rate: \"result.verdict == 'FAITHFUL'\"")
    project.file("in.jsonl", '{"summary": "The cat sat."}\n')
    result = cli("run", str(path), "--input", "in.jsonl", "--quiet")
    assert result.exit_code == 2, result.output
    assert not (project.root / "reports").exists()
    [line] = [line for line in result.output.splitlines() if "JUDGE_BASE_URL" in line]
    assert line.count("pipelines/judge.yaml:") == 1, line
    monkeypatch.setenv("JUDGE_BASE_URL", "http://127.0.0.1:9/v1")      # set: the check passes
    assert load_pipeline(path).name == "summaries"


@pytest.mark.parametrize("api_base, env_line", [
    ("{{ env.JUDGE_BASE_URL | default('http://localhost:1234/v1') }}", "env: [JUDGE_BASE_URL]"),
    ("{{ env.JUDGE_BASE_URL if env.JUDGE_BASE_URL is defined else 'http://localhost:1234/v1' }}",
     "env: [JUDGE_BASE_URL]"),
    ("http://localhost:1234/v1", "env: [JUDGE_BASE_URL]"),                  # declared, never needed
])
def test_a_guarded_or_unused_variable_is_not_needed(project, monkeypatch, api_base, env_line):
    monkeypatch.delenv("JUDGE_BASE_URL", raising=False)
    path = summary_judge(project, vote="{field: faithful, method: majority}",
                         rates="pass_rate: \"result.verdict == 'FAITHFUL'\"", api_base=api_base, env_line=env_line)
    assert load_pipeline(path).name == "summaries"


def test_a_model_disabled_when_its_variable_is_absent_does_not_need_it(project, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    project.prompt("q.j2", "Question {{ item.q }}\n")
    path = project.pipeline("""
        version: 1
        name: keyed
        env: [OPENAI_API_KEY]
        models:
          local: {model: openai/local, api_base: "http://localhost:1234/v1"}
          openai: {model: gpt-4o-mini, api_key: "{{ env.OPENAI_API_KEY }}", enabled: "{{ env.OPENAI_API_KEY is defined }}"}
        steps:
          - {id: ask, uses: jury, with: {models: [local, openai], prompt: q.j2, json: true, vote: {field: v}}}
        output: {v: "{{ steps.ask.v }}"}
        """)
    assert load_pipeline(path).name == "keyed"


@pytest.mark.parametrize("method, field, message", [
    ("median", "reason", "'median' needs numbers; 'reason' is string"),
    ("majority", "score", "'majority' needs a string, enum, boolean or integer; 'score' is number"),
])
def test_vote_methods_against_field_types(project, method, field, message):
    path = summary_judge(project, vote=f"{{field: {field}, method: {method}}}",
                         rates="pass_rate: \"result.verdict == 'FAITHFUL'\"", env_line="", api_base="http://h/v1")
    [problem] = problems_of(path)
    assert problem.startswith("pipelines/judge.yaml:15:") and message in problem, problem


@pytest.mark.parametrize("method, field", [("majority", "faithful"), ("plurality", "grade"), ("mean", "score"),
                                           ("unanimous", "faithful")])
def test_vote_methods_that_suit_their_field(project, method, field):
    path = summary_judge(project, vote=f"{{field: {field}, method: {method}}}",
                         rates="pass_rate: \"result.verdict == 'FAITHFUL'\"", env_line="", api_base="http://h/v1")
    assert load_pipeline(path).name == "summaries"


def test_every_expression_reads_only_names_in_its_scope(project):
    project.prompt("q.j2", "Question {{ item.q }}\n")
    path = project.pipeline("""
        version: 1
        name: scopes
        steps:
          - {id: score, uses: compute, with: {value: "{{ item.n }}"}}
          - {id: verdict, uses: decide, with: {rules: [{when: "steps.score.value > 2", verdict: PASS}, {verdict: FAIL}]}}
        output:
          verdict: "{{ steps.verdict.verdict }}"
        summary:
          count_by: verdict
          pass_when: "verdict == 'PASS'"
          rates:
            pass_rate: "result.verdict == 'PASS'"
            other_rate: "{{ counts.PASS > 0 }}"
          fields:
            passes: "{{ pass_rate_count + later }}"
            later: "{{ total }}"
          assessment:
            - {when: "pass_rate > 0.5 and result.verdict", text: "mostly passing"}
        memo: {key: "{{ steps.score.value }}", store: m.json}
        """)
    found = problems_of(path)
    wanted = {
        "summary.pass_when": "undefined name 'verdict'",
        "summary.rates.other_rate": "undefined name 'counts'",
        "summary.fields.passes": "'later'",
        "summary.assessment[0].when": "undefined name 'result'",
        "memo.key": "undefined name 'steps'",
    }
    for where, text in wanted.items():
        assert any(f": {where}: " in p and text in p for p in found), (where, found)
    assert len(found) == len(wanted), found


def test_decide_rules_no_input_can_reach(project):
    path = project.pipeline("""
        version: 1
        name: unreachable
        steps:
          - id: verdict
            uses: decide
            with:
              rules:
                - {when: "item.n > 2", verdict: BIG}
                - {verdict: SMALL}
                - {when: "item.n < 0", verdict: NEGATIVE}
                - {when: false, verdict: NEVER}
        output: {verdict: "{{ steps.verdict.verdict }}"}
        """)
    found = problems_of(path)
    assert len(found) == 2, found
    assert found[0].startswith("pipelines/p.yaml:10:11: steps[0].with.rules[2]: this rule can never apply: "
                               "rules[1] has no `when` and always applies first;")
    assert "steps[0].with.rules[3]" in found[1]


def test_comparisons_that_cannot_hold_and_loops_over_what_is_not_a_list(project):
    project.schema("grade.schema.json", {"type": "object", "required": ["grade", "score"],
                                         "properties": {"grade": {"enum": ["PASS", "FAIL"]},
                                                        "score": {"type": "number"}}})
    project.prompt("q.j2", "Question {{ item.q }}\n")
    path = project.pipeline("""
        version: 1
        name: compare
        params: {threshold: "0.8", sections: "intro"}
        models:
          m: {model: openai/m, api_base: "http://h/v1"}
        steps:
          - {id: ask, uses: llm, with: {model: m, prompt: q.j2, output_schema: grade.schema.json}}
          - id: verdict
            uses: decide
            with:
              rules:
                - {when: "steps.ask.output.score >= params.threshold", verdict: HIGH}
                - {when: "steps.ask.output.grade == 'PASSED'", verdict: PASSED}
                - {verdict: LOW}
          - id: each
            uses: foreach
            with: {items: "{{ params.sections }}", as: section, steps: [{id: s, uses: compute, with: {v: 1}}]}
        output:
          verdict: "{{ steps.verdict.verdict }}"
        summary:
          rates: {high_rate: "result.verdict == 'HIHG'"}
        """)
    found = problems_of(path)
    assert any("steps[1].with.rules[0].when: " in p and "compares a number with a string" in p for p in found), found
    assert any("steps[1].with.rules[1].when: " in p and "'PASSED'" in p and "PASS, FAIL" in p for p in found), found
    assert any("steps[2].with.items: " in p and "not a list" in p for p in found), found
    assert any("summary.rates.high_rate: " in p and "'HIHG'" in p and "Did you mean 'HIGH'" in p for p in found), found
    assert len(found) == 4, found


def test_the_shipped_pipelines_validate_with_no_variables_set(cli, monkeypatch):
    from pathlib import Path
    repo = Path(__file__).resolve().parents[2]
    for name in ("LOCAL_LLM_BASE_URL", "LOCAL_LLM_API_KEY", "OPENAI_API_KEY", "GOOGLE_API_KEY", "OLLAMA_BASE_URL",
                 "JUDGE_BASE_URL", "JUDGE_API_KEY", "PARSER_BASE_URL", "PARSER_API_KEY", "TAVILY_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    result = cli("validate", *sorted(str(p) for p in (repo / "pipelines").glob("*.yaml")))
    assert result.exit_code == 0, result.output


def test_the_same_three_mistakes_written_another_way_are_found(project, cli, monkeypatch):
    """An inline answer schema that allows other properties, the variable in an api_key and
    a second model, a rate written as a template: still three located messages."""
    monkeypatch.delenv("SUMMARY_JUDGE_KEY", raising=False)
    project.prompt("judge.j2", "Is it faithful? {{ item.text }}\n")
    path = project.pipeline("""
        version: 1
        name: other
        env: [SUMMARY_JUDGE_KEY]
        models:
          first: {model: openai/gpt-4o-mini, api_key: "{{ env.SUMMARY_JUDGE_KEY }}"}
          second: {model: openai/gpt-4o, api_key: "{{ env.SUMMARY_JUDGE_KEY }}"}
        steps:
          - id: panel
            uses: jury
            with:
              models: [first, second]
              prompt: judge.j2
              output_schema: {type: object, additionalProperties: true, properties: {ok: {type: [boolean, "null"]}}}
              vote: {field: ok, method: median}
        output: {ok: "{{ steps.panel.ok }}"}
        summary:
          rates: {ok_rate: "{{ ok }}"}
        """)
    result = cli("validate", str(path))
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 3, result.output
    assert all(LOCATED.match(line) or "Did you mean 'result.ok'?" in line for line in lines), lines
    assert sum("SUMMARY_JUDGE_KEY" in line for line in lines) == 1
    assert any("'median' needs numbers" in line for line in lines)


def test_a_typo_in_a_list_of_verdicts_is_found_however_often_the_pipeline_is_loaded(project):
    """`x in ['A', 'B']`: Jinja's optimizer used to fold the list into one constant while the
    free names were found, so the comparison check never saw its items."""
    project.schema("grade.schema.json", {"type": "object", "required": ["grade"],
                                         "properties": {"grade": {"enum": ["PASS", "FAIL"]}}})
    project.prompt("q.j2", "Question {{ item.q }}\n")
    path = project.pipeline("""
        version: 1
        name: listed
        models:
          m: {model: openai/m, api_base: "http://h/v1"}
        steps:
          - {id: ask, uses: llm, with: {model: m, prompt: q.j2, output_schema: grade.schema.json}}
        output:
          grade: "{{ steps.ask.output.grade }}"
        summary:
          rates: {decided_rate: "result.grade in ['PASS', 'FIAL']"}
        """)
    for _ in range(2):      # the second load reads the trees and checks kept from the first
        [found] = problems_of(path)
        assert "summary.rates.decided_rate: " in found and "'FIAL'" in found and "Did you mean 'FAIL'" in found


def test_an_output_named_as_a_field_runner_writes_itself_is_refused_at_its_name(project, cli):
    """`item_key` and a kept result's notes are runner's own: an output under one of those names
    broke reruns (every item one key) or lost its value when the memo store gave the result back."""
    from runner.checks.json_schema import pipeline_schema
    from runner.stores.kept import NOTES
    refused = pipeline_schema()["properties"]["output"]["propertyNames"]["not"]["enum"]
    assert set(refused) == {"item_key", *(name for name in NOTES if ":" not in name)}   # an output name has no ':'
    path = project.pipeline("""
        version: 1
        name: x
        steps: [{id: s, uses: compute, with: {r: "{{ 1 }}"}}]
        output:
          verdict: "{{ steps.s.r }}"
          _answered: "{{ steps.s.r }}"
          item_key: "{{ steps.s.r }}"
        """)
    result = cli("validate", str(path))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"pipelines/p.yaml:{line}:3: output.{name}: runner writes this field of a result itself (the item's "
        "content key, or a kept result's note); name the output otherwise"
        for line, name in ((6, "_answered"), (7, "item_key"))]


def test_a_summary_rate_or_field_named_as_runners_own_keys_is_refused(project, cli):
    """A field named `errors` replaced the run's own count: a run whose every item errored
    said "errors: 0" and exited 0."""
    path = project.pipeline("""
        version: 1
        name: x
        steps: [{id: s, uses: compute, with: {r: "{{ item.nope }}"}}]
        output: {r: "{{ steps.s.r }}"}
        summary:
          rates: {ok: "result.r == 1"}
          fields:
            errors: "{{ 0 }}"
            ok_count: "{{ 1 }}"
            spread: "{{ 2 }}"
        """)
    result = cli("validate", str(path))
    assert result.exit_code == 2 and result.stderr.splitlines() == [
        "pipelines/p.yaml:8:5: summary.fields.errors: 'errors' would replace summary.json's own 'errors' (runner "
        "writes it): name it otherwise",
        "pipelines/p.yaml:9:5: summary.fields.ok_count: 'ok_count' would replace summary.json's own 'ok_count' "
        "(runner writes it): name it otherwise"]


def test_a_default_without_on_error_default_is_refused(project, cli):
    """It was never given: every item errored as if it were not there."""
    path = project.pipeline("""
        version: 1
        name: x
        steps: [{id: c, uses: compute, with: {x: "{{ item.nope }}"}, default: {x: 2}}]
        output: {x: "{{ steps.c.x }}"}
        """)
    result = cli("validate", str(path))
    assert result.exit_code == 2 and result.stderr.strip() == (
        "pipelines/p.yaml:3:62: steps[0].default: a `default:` value is given only by `on_error: default` (the "
        "step's error then gives it): add on_error: default, or remove default")


@pytest.mark.parametrize("given, message", [
    ("{adapter: json, explode: rows, parent_as: params}",
     "pipelines/p.yaml:3:50: input.parent_as: 'params' would hide the params templates read: name it otherwise"),
    ("{adapter: json, namespaces: [item, steps]}",
     "pipelines/p.yaml:3:43: input.namespaces[1]: 'steps' would hide the steps templates read: name it otherwise"),
    ("{adapter: json, parent_as: batch}",
     "pipelines/p.yaml:3:24: input.parent_as: parent_as names the record an item is exploded from: add explode: "
     "FIELD (the list each item is one element of), or remove parent_as"),
], ids=["parent-as-params", "namespace-steps", "parent-as-alone"])
def test_input_names_that_hide_runners_or_name_nothing_are_refused(project, cli, given, message):
    """Each validated, and every item then failed: `params.t` read the parent record."""
    path = project.pipeline(f"""
        version: 1
        name: x
        input: {given}
        steps: [{{id: c, uses: compute, with: {{x: "{{{{ item.q }}}}"}}}}]
        output: {{x: "{{{{ steps.c.x }}}}"}}
        """)
    result = cli("validate", str(path))
    assert result.exit_code == 2 and result.stderr.strip() == message, result.output


def test_a_listed_or_unequal_value_no_result_holds_is_said_with_what_follows(project, cli):
    """`in ['PASS', 'WARN', 'SKIPPED']` was "can never be true" (the list misquoted), although
    it holds for PASS and WARN; `!=` and `not in` such a value are always true."""
    path = project.pipeline("""
        version: 1
        name: fp
        steps:
          - {id: d, uses: decide, with: {rules: [{when: "item.n > 4", verdict: PASS}, {verdict: FAIL}]}}
        output: {verdict: "{{ steps.d.verdict }}"}
        summary:
          count_by: verdict
          rates: {a: "result.verdict in ['PASS', 'SKIPPED']", b: "result.verdict != 'FAILED'"}
        """)
    result = cli("validate", str(path))
    assert result.exit_code == 2 and [line.split(": ", 2)[2] for line in result.stderr.splitlines()] == [
        "`result.verdict in ['PASS', 'SKIPPED']`: result.verdict is never 'SKIPPED' (it is one of PASS, FAIL), so "
        "that entry of the list never matches; compare with one of them.",
        "`result.verdict != 'FAILED'`: result.verdict is never 'FAILED' (it is one of PASS, FAIL), so it is always "
        "true; compare with one of them. Did you mean 'FAIL'?"]


def test_six_mistakes_that_validated_and_then_judged_wrong_are_refused(project, cli):
    """Each passed validate: a param that cannot be the number its argument needs (every item
    errored), a loop of no iteration, a `mean` of an `anyOf` string, a misspelt `when` (a rule
    that always applied) and `verdict` (left null), a memo key the same for every item (each
    got the first one's result) and a `skip_when` reading no output field (nothing skipped)."""
    project.schema("a.json", {"type": "object", "required": ["ok"], "properties": {
        "ok": {"type": "boolean"}, "label": {"anyOf": [{"type": "string"}, {"type": "null"}]}}})
    project.prompt("j.j2", "Judge {{ item.text }}")
    path = project.pipeline("""
        version: 1
        name: six
        params: {s: abc}
        models: {judge: {model: openai/x, api_base: "http://127.0.0.1:9/v1"}}
        steps:
          - {id: sim, uses: text_similarity, with: {input: "{{ item.text }}", reference: x, metric: fuzzy_match, threshold: "{{ params.s }}"}}
          - {id: again, uses: loop, with: {max: 0, steps: [{id: c, uses: llm, with: {model: judge, prompt: j.j2, output_schema: a.json}}]}}
          - {id: jury, uses: jury, with: {models: [judge, judge, judge], prompt: j.j2, output_schema: a.json, vote: {field: label, method: mean}}}
          - {id: v, uses: decide, with: {rules: [{whenn: "steps.jury.ok", verdict: A}, {when: "item.n", verdcit: B}, {verdict: C}]}}
        output: {verdict: "{{ steps.v.verdict }}"}
        memo: {key: "{{ params.s }}", skip_when: "result.verdcit == 'A'"}
        """)
    result = cli("validate", str(path))
    assert result.exit_code == 2 and [line.split(": ", 1)[1] for line in result.stderr.splitlines()] == [
        "steps[0].with.threshold: with params.s as given: 'abc' is not of type 'number'",
        "steps[1].with.max: 0 is less than the minimum of 1",
        "steps[2].with.vote.method: vote method 'mean' needs numbers; 'label' is string in the answer schema "
        "'a.json'; use method: majority (or unanimous, plurality) for a string, or make 'label' a number",
        "steps[3].with.rules[0].whenn: 'whenn' looks like a typo of 'when' ('when' is a rule's own key); a rule's "
        "keys other than when, stop and min_confidence are its result",
        "steps[3].with.rules[1].verdcit: 'verdcit' looks like a typo of 'verdict' (rules[0] gives 'verdict'); a "
        "rule's keys other than when, stop and min_confidence are its result",
        "memo.key: the key reads nothing of the item, so every item would get the first one's stored result: make "
        "it read the item's content, e.g. \"{{ item.text | sha256 }}\"",
        "memo.skip_when: result.verdcit: unknown output field 'verdcit'. Did you mean 'verdict'?"]


def test_result_keys_that_differ_in_digits_or_that_one_rule_gives_together_are_not_typos(project, cli):
    path = project.pipeline("""
        version: 1
        name: tiers
        steps:
          - {id: v, uses: decide, with: {rules: [{when: "item.n > 4", tier1: A, note: x, notes: y}, {tier2: B}]}}
        output: {t: "{{ steps.v.tier1 }}"}
        """)
    assert cli("validate", str(path)).exit_code == 0


def test_a_loop_whose_templated_max_is_below_one_errors_the_item(project, cli):
    """It ran no iteration and gave `done: false` as if it had tried."""
    (project.root / "items.jsonl").write_text('{"n": 0}\n{"n": 1}\n')
    path = project.pipeline("""
        version: 1
        name: loops
        input: {adapter: jsonl}
        steps:
          - {id: l, uses: loop, with: {max: "{{ item.n }}", steps: [{id: c, uses: compute, with: {x: 1}}]}}
        output: {n: "{{ steps.l.iterations }}"}
        """)
    result = cli("run", str(path), "--input", "items.jsonl", "--out", "out")
    lines = [json.loads(line) for line in (project.root / "out" / "results.jsonl").read_text().splitlines()]
    assert result.exit_code == 0 and [r.get("error") for r in lines] == [
        "step 'l': pipelines/p.yaml:5:37: steps[0].with.max: 0 iterations: give at least 1", None]


def test_a_param_the_step_takes_once_rendered_is_not_refused(project, cli):
    """(review) The check refused `max: "{{ params.n }}"` with n: "3" (a loop converts it), a
    query from a number param, and a null param left to `--set`."""
    path = project.pipeline("""
        version: 1
        name: forms
        params: {n: "3", q: 42, t: null}
        steps:
          - {id: l, uses: loop, with: {max: "{{ params.n }}", steps: [{id: c, uses: compute, with: {x: 1}}]}}
          - {id: sim, uses: text_similarity, with: {input: "{{ params.q }}", reference: x, metric: fuzzy_match, threshold: "{{ params.t }}"}}
        output: {n: "{{ steps.l.iterations }}"}
        """)
    result = cli("validate", str(path))
    assert result.exit_code == 0, result.output
    assert cli("validate", str(path), "--set", "params.n=x").exit_code == 2


def test_result_keys_that_are_words_of_their_own_are_not_taken_for_typos(project, cli):
    """(review) `confidence` was a typo of min_confidence, `step` of stop, `max_score` of
    `min_score` and `category` of `subcategory`."""
    path = project.pipeline("""
        version: 1
        name: words
        steps:
          - id: v
            uses: decide
            with:
              rules:
                - {when: "item.n > 4", confidence: 0.9, step: 2, max_score: 1, category: a}
                - {when: "item.n > 2", min_score: 0, subcategory: b}
                - {verdict: C}
        output: {v: "{{ steps.v.verdict }}"}
        """)
    result = cli("validate", str(path))
    assert result.exit_code == 0, result.output


def test_a_memo_key_from_an_include_and_a_mean_of_a_number_or_an_abstention_validate(project, cli):
    """(review) A key built in an included template was "reads nothing of the item", and a mean
    vote on `anyOf: [integer, "n/a"]` (a juror's "n/a" is an abstention) was refused."""
    project.prompt("key.j2", "{{ item.n }}")
    project.schema("s.json", {"type": "object", "required": ["score"], "properties": {
        "score": {"anyOf": [{"type": "integer"}, {"type": "string", "enum": ["n/a"]}]}}})
    project.prompt("j.j2", "Score {{ item.n }}")
    path = project.pipeline("""
        version: 1
        name: kept
        models: {a: {model: openai/a, api_base: "http://127.0.0.1:9/v1"}, b: {model: openai/b, api_base: "http://127.0.0.1:9/v1"}}
        steps: [{id: jury, uses: jury, with: {models: [a, b], prompt: j.j2, output_schema: s.json, vote: {field: score, method: mean}}}]
        output: {score: "{{ steps.jury.score }}"}
        memo: {key: "{% include 'key.j2' %}"}
        """)
    result = cli("validate", str(path))
    assert result.exit_code == 0, result.output
