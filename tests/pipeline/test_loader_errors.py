"""Every broken pipeline gets an exact, located message (file:line:col: path: message)."""

from __future__ import annotations

import pytest

from runner.errors import ConfigError
from runner.pipeline.loader import load_pipeline

PROMPTS = {
    "ok.j2": "Hello {{ item.x }}\n",
    "bad.j2": "Hello {% if %}\n",
    "undef.j2": "Hello {{ itme.x }}\n",
    "reads.j2": "{{ steps.a.output.scroe }}\n",
}
SCHEMAS = {
    "score.schema.json": {"type": "object", "required": ["score", "reason"],
                          "properties": {"score": {"type": "integer"}, "reason": {"type": "string"}}},
}

CASES = [
    ("yaml_syntax", """
        version: 1
        name: x
        steps: [
          {id: a, uses: compute
        """, ["pipelines/p.yaml:5:1: YAML syntax error: expected ',' or '}', but got '<stream end>' "
              "(while parsing a flow mapping)"]),
    ("duplicate_key", """
        version: 1
        name: x
        name: y
        steps: [{id: a, uses: compute, with: {v: 1}}]
        """, ["pipelines/p.yaml:3:1: name: duplicate key 'name' (first defined at line 2)"]),
    ("unknown_key", """
        version: 1
        name: x
        stepz: []
        steps:
          - id: a
            uses: compute
            whith: {v: 1}
        """, ["pipelines/p.yaml:3:1: stepz: unknown key 'stepz'. Did you mean 'steps'?",
              "pipelines/p.yaml:7:5: steps[0].whith: unknown key 'whith'. Did you mean 'with'?"]),
    ("wrong_type", """
        version: 1
        name: x
        steps:
          - id: a
            uses: read_lines
            with: {root: data, file: f, start: high}
        """, ["pipelines/p.yaml:6:40: steps[0].with.start: 'high' is not of type 'integer' "
              "(and is not a {{ template }})"]),
    ("unknown_step_type", """
        version: 1
        name: x
        steps:
          - id: a
            uses: desicde
            with: {rules: []}
        """, ["pipelines/p.yaml:5:11: steps[0].uses: unknown step type 'desicde'. Did you mean 'decide'?"]),
    ("unknown_model", """
        version: 1
        name: x
        models:
          local: {model: openai/x}
        steps:
          - id: a
            uses: llm
            with: {model: locl, prompt: ok.j2}
        """, ["pipelines/p.yaml:8:19: steps[0].with.model: unknown model 'locl'. Did you mean 'local'?"]),
    ("later_step", """
        version: 1
        name: x
        steps:
          - id: a
            uses: compute
            with: {v: "{{ steps.b.v }}"}
          - id: b
            uses: compute
            with: {v: 1}
        """, ["pipelines/p.yaml:6:15: steps[0].with.v: steps.b refers to a step that has not run yet "
              "(step 'b' at pipelines/p.yaml:7:9 runs later)"]),
    ("missing_step", """
        version: 1
        name: x
        steps:
          - id: a
            uses: compute
            with: {v: 1}
          - id: b
            uses: compute
            with: {v: "{{ steps.aa.v }}"}
        """, ["pipelines/p.yaml:9:15: steps[1].with.v: steps.aa: no earlier step has id 'aa'. Did you mean 'a'?"]),
    ("missing_template", """
        version: 1
        name: x
        models: {m: {model: openai/x}}
        steps:
          - id: a
            uses: llm
            with: {model: m, prompt: nothere.j2}
        """, ["pipelines/p.yaml:7:30: steps[0].with.prompt: prompt template 'nothere.j2' not found "
              "(prompts/nothere.j2)"]),
    ("template_syntax", """
        version: 1
        name: x
        models: {m: {model: openai/x}}
        steps:
          - id: a
            uses: llm
            with: {model: m, prompt: bad.j2}
          - id: b
            uses: compute
            with: {v: "{{ item.x + }}"}
        """, ["pipelines/p.yaml:7:30: steps[0].with.prompt: prompt template 'bad.j2' line 1: "
              "Expected an expression, got 'end of statement block'",
              "pipelines/p.yaml:10:15: steps[1].with.v: template syntax error: unexpected 'end of print statement'"]),
    ("undefined_variable", """
        version: 1
        name: x
        params: {threshold: 0.8}
        env: [HOME]
        models: {m: {model: openai/x}}
        steps:
          - id: a
            uses: compute
            with: {v: "{{ itm.x }}", w: "{{ params.treshold }}", z: "{{ env.PATH }}"}
          - id: b
            uses: llm
            with: {model: m, prompt: undef.j2}
        """, ["pipelines/p.yaml:9:15: steps[0].with.v: undefined name 'itm'. Did you mean 'item'?",
              "pipelines/p.yaml:9:33: steps[0].with.w: unknown param 'treshold'. Did you mean 'threshold'?",
              "pipelines/p.yaml:9:61: steps[0].with.z: env.PATH is not declared: add 'PATH' to the "
              "pipeline's `env:` list",
              "pipelines/p.yaml:12:30: steps[1].with.prompt: prompt template 'undef.j2': undefined name 'itme'. "
              "Did you mean 'item'?"]),
    ("empty_steps", """
        version: 1
        name: x
        steps: []
        """, ["pipelines/p.yaml:3:8: steps: must not be empty"]),
    ("missing_required", """
        version: 1
        steps: [{id: a, uses: compute, with: {v: 1}}]
        """, ["pipelines/p.yaml:1:1: 'name' is required"]),
    ("duplicate_step_id", """
        version: 1
        name: x
        steps:
          - {id: a, uses: compute, with: {v: 1}}
          - {id: a, uses: compute, with: {v: 2}}
        """, ["pipelines/p.yaml:5:10: steps[1].id: duplicate step id 'a' (first at pipelines/p.yaml:4:10)"]),
    ("bad_step_argument", """
        version: 1
        name: x
        steps:
          - id: a
            uses: decide
            with: {rulez: []}
        """, ["pipelines/p.yaml:6:11: steps[0].with: 'rules' is required",
              "pipelines/p.yaml:6:12: steps[0].with.rulez: unknown key 'rulez'. Did you mean 'rules'?"]),
    ("wrong_step_field", """
        version: 1
        name: x
        models: {m: {model: openai/x}}
        steps:
          - id: jury
            uses: jury
            with: {models: [m], prompt: ok.j2, output_schema: score.schema.json, vote: {field: score}}
          - id: verdict
            uses: decide
            with:
              rules: [{verdict: "{{ steps.jury.verdict }}"}]
        output:
          score: "{{ steps.jury.score }}"
          votes: "{{ steps.jury.vots }}"
        """, ["pipelines/p.yaml:11:25: steps[1].with.rules[0].verdict: steps.jury.verdict: step 'jury' has no "
              "field 'verdict' (its fields: agreement, attempts, calls, decided, outcome, reason, score, seats, valid_votes, votes)",
              "pipelines/p.yaml:14:10: output.votes: steps.jury.vots: step 'jury' has no field 'vots'. "
              "Did you mean 'votes'?"]),
    ("wrong_vote_field", """
        version: 1
        name: x
        models: {m: {model: openai/x}}
        steps:
          - id: jury
            uses: jury
            with: {models: [m], prompt: ok.j2, output_schema: score.schema.json, vote: {field: scor}}
        """, ["pipelines/p.yaml:7:88: steps[0].with.vote.field: 'scor' is not a property of the answer schema "
              "'score.schema.json'. Did you mean 'score'?"]),
    ("wrong_nested_step_field", """
        version: 1
        name: x
        models: {m: {model: openai/x}}
        steps:
          - id: a
            uses: llm
            with: {model: m, prompt: ok.j2, output_schema: score.schema.json}
          - id: b
            uses: llm
            with: {model: m, prompt: reads.j2}
          - id: each
            uses: foreach
            with:
              items: [1, 2]
              as: n
              steps:
                - {id: c, uses: compute, with: {twice: "{{ n * 2 }}"}}
                - {id: d, uses: compute, with: {v: "{{ steps.c.twise }}"}}
        output_base: "{{ {'raw': steps.a.rwa} }}"
        """, ["pipelines/p.yaml:10:30: steps[1].with.prompt: prompt template 'reads.j2': steps.a.output.scroe: "
              "steps.a.output has no field 'scroe'. Did you mean 'score'?",
              "pipelines/p.yaml:18:44: steps[2].with.steps[1].with.v: steps.c.twise: step 'c' has no field "
              "'twise'. Did you mean 'twice'?",
              "pipelines/p.yaml:19:14: output_base: steps.a.rwa: step 'a' has no field 'rwa'. "
              "Did you mean 'raw'?"]),
]


# ---- validate follows includes and knows every filter, test and result field (issues 31 H18, 32.5)

NAME_PROMPTS = {
    "filters.j2": "Question {{ item.q }}\n{{ item.q | upperr }}\n",
    "inc.j2": "Header\n{% include 'missing.j2' %}\n",
    "broken_inc.j2": "{% include 'broken.j2' %}\n",
    "broken.j2": "ok\n{{ item.q }\n",
    "uses_part.j2": "{% include 'part.j2' %}\n",
    "part.j2": "{{ itme.q }}\n",
    "loop_a.j2": "{% include 'loop_b.j2' %}\n",
    "loop_b.j2": "{% include 'loop_a.j2' %}{{ item.q | map('lowerr') | list }}\n",
    "macros.j2": "{% macro box(x) %}[{{ x | center(9) }}]{% endmacro %}\n",
    "imports.j2": "{% from 'macros.j2' import box %}{{ box(item.q) }}\n",
}

NAME_CASES = [
    ("unknown_filters_and_tests", """
        version: 1
        name: x
        steps:
          - id: a
            uses: compute
            if: "item.n is evn"
            with: {v: "{{ item.claim | trimm }}", w: "{{ item.tags | map('trimm') | select('odd') | list }}",
                   z: "{{ item.tags | selectattr('n', 'eqalto', 1) | list }}", ok: "{{ item.q | map(attribute='x') }}"}
        """, ["pipelines/p.yaml:6:9: steps[0].if: unknown test 'evn'. Did you mean 'even'?",
              "pipelines/p.yaml:7:15: steps[0].with.v: unknown filter 'trimm'. Did you mean 'trim'?",
              "pipelines/p.yaml:7:46: steps[0].with.w: unknown filter 'trimm'. Did you mean 'trim'?",
              "pipelines/p.yaml:8:15: steps[0].with.z: unknown test 'eqalto'. Did you mean 'equalto'?"]),
    ("prompt_files_and_includes", """
        version: 1
        name: x
        models: {m: {model: openai/x}}
        steps:
          - {id: a, uses: llm, with: {model: m, prompt: filters.j2}}
          - {id: b, uses: llm, with: {model: m, prompt: inc.j2}}
          - {id: c, uses: llm, with: {model: m, prompt: broken_inc.j2}}
          - {id: d, uses: llm, with: {model: m, prompt: uses_part.j2}}
          - {id: e, uses: llm, with: {model: m, prompt: loop_a.j2}}
          - {id: f, uses: llm, with: {model: m, prompt: imports.j2}}
          - {id: g, uses: compute, with: {v: "{% include 'gone.j2' %}"}}
        """, ["pipelines/p.yaml:5:49: steps[0].with.prompt: prompt template 'filters.j2': line 2: "
              "unknown filter 'upperr'. Did you mean 'upper'?",
              "pipelines/p.yaml:6:49: steps[1].with.prompt: prompt template 'inc.j2': line 2: "
              "include 'missing.j2': not found in the prompts folder",
              "pipelines/p.yaml:7:49: steps[2].with.prompt: prompt template 'broken_inc.j2': line 1: "
              "include 'broken.j2': line 2: unexpected '}'",
              "pipelines/p.yaml:8:49: steps[3].with.prompt: prompt template 'uses_part.j2': line 1: "
              "include 'part.j2': undefined name 'itme'. Did you mean 'item'?",
              "pipelines/p.yaml:9:49: steps[4].with.prompt: prompt template 'loop_a.j2': line 1: "
              "include 'loop_b.j2': line 1: unknown filter 'lowerr'. Did you mean 'lower'?",
              "pipelines/p.yaml:11:38: steps[6].with.v: include 'gone.j2': not found in the prompts folder"]),
    ("result_fields", """
        version: 1
        name: x
        steps:
          - {id: a, uses: compute, with: {v: "{{ item.n > 1 }}"}}
        output:
          passed: "{{ steps.a.v }}"
          verdict: "{{ 'PASS' if steps.a.v else 'FAIL' }}"
        summary:
          count_by: verdit
          rates: {pass_rate: "result.pased", ok_rate: "{{ result.passed and not result.error }}"}
          report_columns: [verdcit, verdict, index, error, passed.nested]
        """, ["pipelines/p.yaml:9:13: summary.count_by: unknown output field 'verdit'. Did you mean 'verdict'?",
              "pipelines/p.yaml:10:22: summary.rates.pass_rate: result.pased: unknown output field 'pased'. "
              "Did you mean 'passed'?",
              "pipelines/p.yaml:11:20: summary.report_columns[0]: unknown output field 'verdcit'. "
              "Did you mean 'verdict'?"]),
]



@pytest.mark.parametrize("name,text,expected", CASES + NAME_CASES, ids=[c[0] for c in CASES + NAME_CASES])
def test_broken_pipeline_messages(project, name, text, expected):
    for file, body in {**PROMPTS, **NAME_PROMPTS}.items():
        project.prompt(file, body)
    for file, schema in SCHEMAS.items():
        project.schema(file, schema)
    path = project.pipeline(text)
    with pytest.raises(ConfigError) as caught:
        load_pipeline(path)
    assert str(caught.value).splitlines() == expected


OK_PIPELINE = """
    version: 1
    name: x
    params: {threshold: 0.8}
    models: {m: {model: openai/x}}
    steps:
      - id: a
        uses: compute
        with: {v: "{{ params.threshold }}"}
    """

SET_CASES = [
    (["params.treshold=1"], ["--set params.treshold=1: params.treshold: unknown param 'treshold'. "
                             "Did you mean 'threshold'?"]),
    (["modelz.x=1"], ["--set modelz.x=1: modelz.x: 'modelz' is not a key of the pipeline. Did you mean 'models'?"]),
    (["steps.a.wiht.v=3"], ["--set steps.a.wiht.v=3: steps.a.wiht.v: 'wiht' is not a key of steps.a. "
                            "Did you mean 'with'?"]),
    (["models.m.timeout=soon"], ["--set models.m.timeout=soon: models.m.timeout: 'soon' is not of type 'number' "
                                 "(and is not a {{ template }})"]),
    (["models.n.enabled=true"], ["--set models.n.enabled=true: models.n.enabled: unknown model 'n' "
                                 "(defined: m)"]),
]


@pytest.mark.parametrize("assignments,expected", SET_CASES)
def test_bad_set_paths(project, assignments, expected):
    path = project.pipeline(OK_PIPELINE)
    with pytest.raises(ConfigError) as caught:
        load_pipeline(path, assignments)
    assert str(caught.value).splitlines() == expected


def test_set_writes_keys_the_file_does_not_have(project):
    path = project.pipeline(OK_PIPELINE)
    pipeline = load_pipeline(path, ["models.m.limits.requests_per_day=1000", "models.m.enabled=true",
                                    "params.threshold=0.9", "steps.a.with.v=3"])
    assert pipeline.models["m"]["limits"] == {"requests_per_day": 1000}
    assert pipeline.models["m"]["enabled"] is True
    assert pipeline.params["threshold"] == 0.9
    assert pipeline.steps[0].args == {"v": 3}


def test_every_problem_is_reported_at_once(project):
    path = project.pipeline("""
        version: 1
        name: x
        steps:
          - {id: a, uses: nope}
          - {id: b, uses: compute, with: {v: "{{ steps.zz }}"}}
          - {id: c, uses: compute, with: {v: "{{ params.p }}"}}
        """)
    with pytest.raises(ConfigError) as caught:
        load_pipeline(path)
    assert len(caught.value.problems) == 3


def test_validate_cli_exit_codes(project, cli):
    good = project.pipeline(OK_PIPELINE, "good.yaml")
    bad = project.pipeline("version: 1\nname: x\nsteps: []\n", "bad.yaml")
    result = cli("validate", str(good))
    assert result.exit_code == 0 and "ok (1 steps)" in result.stdout
    result = cli("validate", str(good), str(bad))
    assert result.exit_code == 2
    assert "pipelines/bad.yaml:3:8: steps: must not be empty" in result.stderr
    assert "Traceback" not in result.output


def test_missing_pipeline_file(project, cli):
    result = cli("validate", "pipelines/none.yaml")
    assert result.exit_code == 2
    assert result.stderr.strip() == "pipelines/none.yaml: pipeline file not found"


def test_paths_resolve_against_the_pipeline_project_not_cwd(project, tmp_path, monkeypatch):
    project.prompt("ok.j2", "hi")
    path = project.pipeline("""
        version: 1
        name: x
        models: {m: {model: openai/x}}
        steps:
          - {id: a, uses: llm, with: {model: m, prompt: ok.j2}}
        """)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load_pipeline(path.resolve()).prompts_dir == tmp_path / "prompts"


def test_top_level_concurrency_sees_params_only(project):
    path = project.pipeline("""
        version: 1
        name: x
        params: {workers: 3}
        concurrency: "{{ item.n }}"
        steps: [{id: a, uses: compute, with: {v: 1}}]
        """)
    with pytest.raises(ConfigError) as caught:
        load_pipeline(path)
    assert str(caught.value) == ("pipelines/p.yaml:4:14: concurrency: undefined name 'item' "
                                 "(in scope: env, params)")


def test_validate_cli_reports_an_unknown_filter_in_a_prompt_file(project, cli):
    project.prompt("ask.j2", "Question {{ item.q | trimm }}\n")
    project.pipeline("""
        version: 1
        name: x
        models: {m: {model: openai/x}}
        steps: [{id: a, uses: llm, with: {model: m, prompt: ask.j2}}]
        """)
    result = cli("validate", "pipelines/p.yaml")
    assert result.exit_code == 2
    assert result.stderr == ("pipelines/p.yaml:4:53: steps[0].with.prompt: prompt template 'ask.j2': line 1: "
                             "unknown filter 'trimm'. Did you mean 'trim'?\n")
