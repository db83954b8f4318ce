"""`extends:`: variants merged over their base, steps patched by id, every error located
in the file that wrote the wrong value, chains and cycles; and params declared once."""

from __future__ import annotations

import json

import pytest

from helpers import run, write_json
from runner.errors import ConfigError
from runner.pipeline.loader import load_pipeline

BASE = """
version: 1
name: base
params:
  threshold: {default: 0.8, type: number, minimum: 0, maximum: 1, description: share of the quote}
  label: {default: low, enum: [low, high]}
  words: 5
steps:
  - id: first
    uses: compute
    with: {a: "{{ params.threshold }}"}
  - id: second
    uses: compute
    with: {b: "{{ params.label }}", c: "{{ params.words }}"}
  - id: third
    uses: compute
    with: {d: 1}
output:
  a: "{{ steps.first.a }}"
  b: "{{ steps.second.b }}"
  c: "{{ steps.second.c }}"
"""


def load(project, text, name="variant.yaml"):
    project.pipeline(BASE, "base.yaml")
    return load_pipeline(project.pipeline(text, name))


def problems(project, text, name="variant.yaml"):
    with pytest.raises(ConfigError) as caught:
        load(project, text, name)
    return str(caught.value)


def test_a_variant_changes_a_param_and_keeps_its_declaration(project):
    pipeline = load(project, "extends: base.yaml\nparams: {threshold: 0.95}\n")
    assert pipeline.name == "variant"                      # the variant's file name unless it gives one
    assert pipeline.params == {"threshold": 0.95, "label": "low", "words": 5}
    assert pipeline.params_schema["threshold"] == {"type": "number", "minimum": 0, "maximum": 1,
                                                   "description": "share of the quote"}
    assert [s.id for s in pipeline.steps] == ["first", "second", "third"]
    assert [p.name for p in pipeline.sources] == ["variant.yaml", "base.yaml"]


def test_a_value_out_of_the_base_range_is_located_in_the_variant(project):
    said = problems(project, "extends: base.yaml\nname: strict\nparams:\n  threshold: 1.5\n")
    assert said == "pipelines/variant.yaml:4:14: params.threshold: 1.5 is greater than the maximum of 1"


def test_a_wrong_key_in_a_variant_is_located_in_the_variant(project):
    said = problems(project, "extends: base.yaml\nparms: {threshold: 0.9}\n")
    assert said.startswith("pipelines/variant.yaml:2:1: parms: unknown key 'parms'. Did you mean 'params'?")


def test_a_misspelt_param_is_refused_not_added(project):
    said = problems(project, "extends: base.yaml\nparams:\n  treshold: 0.9\n")
    assert said == ("pipelines/variant.yaml:3:3: params.treshold: the base has no param 'treshold'. Did you mean "
                    "'threshold'?; a new param needs a declaration: {default: ..., type: ...}")
    pipeline = load(project, "extends: base.yaml\nparams:\n  extra: {default: 2, type: integer}\n")
    assert pipeline.params["extra"] == 2


def test_an_error_in_the_base_is_located_in_the_base(project):
    project.pipeline(BASE.replace("{b: \"{{ params.label }}\"", "{b: \"{{ params.lable }}\""), "base.yaml")
    with pytest.raises(ConfigError) as caught:
        load_pipeline(project.pipeline("extends: base.yaml\nparams: {words: 3}\n", "variant.yaml"))
    assert str(caught.value).startswith("pipelines/base.yaml:13:")
    assert "unknown param 'lable'" in str(caught.value)


def test_steps_are_patched_by_id_placed_and_removed(project):
    pipeline = load(project, """
        extends: base.yaml
        steps:
          - id: second
            with: {c: "{{ params.words * 2 }}"}
          - id: extra
            uses: compute
            after: first
            with: {e: "{{ steps.first.a }}"}
          - id: third
            remove: true
          - id: zero
            uses: compute
            before: first
            with: {z: 0}
        output:
          e: "{{ steps.extra.e }}"
        """)
    assert [s.id for s in pipeline.steps] == ["zero", "first", "extra", "second"]
    second = pipeline.steps[3]
    assert second.args == {"b": "{{ params.label }}", "c": "{{ params.words * 2 }}"}      # with: merged
    assert set(pipeline.output) == {"a", "b", "c", "e"}
    assert pipeline.where(second.path + ("with", "b")).startswith("pipelines/base.yaml:13:")
    assert pipeline.where(second.path + ("with", "c")).startswith("pipelines/variant.yaml:4:")


@pytest.mark.parametrize("steps,message", [
    ("  - {id: secnd, with: {c: 1}}",
     "pipelines/variant.yaml:3:10: steps[0].id: the base has no step 'secnd'. Did you mean 'second'?; 'secnd' is new: "
     "say where it goes with `after: ID` or `before: ID`"),
    ("  - {id: new, uses: compute, after: frist, with: {x: 1}}",
     "pipelines/variant.yaml:3:37: steps[0].after: no step 'frist' to place 'new' after. Did you mean 'first'?"),
    ("  - {id: gone, remove: true}",
     "pipelines/variant.yaml:3:10: steps[0].id: the base has no step 'gone' (its steps: first, second, third); "
     "'gone' cannot be removed"),
    ("  - {id: x, uses: compute, after: first, before: third, with: {x: 1}}",
     "pipelines/variant.yaml:3:50: steps[0].before: give one of `after:` and `before:`"),
])
def test_step_patches_that_cannot_apply_are_located(project, steps, message):
    assert problems(project, f"extends: base.yaml\nsteps:\n{steps}\n") == message


def test_placing_keys_outside_a_variant_are_refused(project):
    path = project.pipeline("version: 1\nname: p\nsteps:\n  - {id: a, uses: compute, after: b, with: {x: 1}}\n")
    with pytest.raises(ConfigError, match=r"p.yaml:4:28: steps\[0\].after: `after:` places a step of a variant"):
        load_pipeline(path)


def test_chains_and_cycles(project):
    project.pipeline(BASE, "base.yaml")
    project.pipeline("extends: base.yaml\nparams: {words: 7}\n", "middle.yaml")
    pipeline = load_pipeline(project.pipeline("extends: middle.yaml\nparams: {label: high}\n", "top.yaml"))
    assert pipeline.params == {"threshold": 0.8, "label": "high", "words": 7}
    assert [p.name for p in pipeline.sources] == ["top.yaml", "middle.yaml", "base.yaml"]
    project.pipeline("extends: b.yaml\n", "a.yaml")
    project.pipeline("extends: a.yaml\n", "b.yaml")
    with pytest.raises(ConfigError) as caught:
        load_pipeline(project.root / "pipelines" / "a.yaml")
    assert "pipelines/b.yaml:1:10: extends: extends cycle: pipelines/a.yaml -> pipelines/b.yaml -> " \
           "pipelines/a.yaml" in str(caught.value)


@pytest.mark.parametrize("target,message", [
    ("missing.yaml", "'missing.yaml' not found"),
    ("../../etc/passwd", "'../../etc/passwd' leaves the project"),
    ("/etc/hostname", "'/etc/hostname' must be a path relative to pipelines/variant.yaml"),
])
def test_a_base_must_be_a_file_of_the_project(project, target, message):
    assert message in problems(project, f"extends: {target}\n")


def test_a_variant_runs_and_run_json_records_every_file(project, cli):
    load(project, "extends: base.yaml\nparams: {threshold: 0.5}\n")
    source = write_json(project.root / "in.json", [{"x": 1}])
    outcome = run(project.root / "pipelines" / "variant.yaml", source, out=project.root / "out")
    assert outcome.results[0]["a"] == 0.5
    manifest = json.loads((project.root / "out" / "run.json").read_text())
    assert manifest["pipeline"]["file"] == "pipelines/variant.yaml" and manifest["pipeline"]["file_sha256"]
    assert set(manifest["pipeline"]["files"]) == {"pipelines/base.yaml"}
    assert manifest["pipeline"]["resolved"]["params"]["threshold"] == 0.5


def test_diff_sees_a_change_of_the_base(project, cli):
    load(project, "extends: base.yaml\n")
    source = write_json(project.root / "in.json", [{"x": 1}])
    variant = project.root / "pipelines" / "variant.yaml"
    assert cli("run", str(variant), "--input", str(source), "--quiet").exit_code == 0
    project.pipeline(BASE.replace("{d: 1}", "{d: 2}"), "base.yaml")
    assert cli("run", str(variant), "--input", str(source), "--quiet").exit_code == 0
    said = cli("diff").output
    assert "pipelines/base.yaml:" in said and "pipeline hash:" in said


# ---- params declared once -------------------------------------------------------------------

def test_the_one_block_form_checks_values_and_sets(project, cli):
    path = project.pipeline(BASE, "base.yaml")
    pipeline = load_pipeline(path)
    assert pipeline.params == {"threshold": 0.8, "label": "low", "words": 5}
    with pytest.raises(ConfigError, match=r"--set params.threshold=2: params.threshold: 2 is greater than"):
        load_pipeline(path, ["params.threshold=2"])
    with pytest.raises(ConfigError, match=r"'middle' is not one of \['low', 'high'\]"):
        load_pipeline(path, ["params.label=middle"])


def test_a_declaration_with_an_unknown_key_is_an_error(project):
    path = project.pipeline("version: 1\nname: p\nparams:\n  t: {default: 1, type: integer, minimun: 0}\n"
                            "steps: [{id: a, uses: compute, with: {x: 1}}]\n")
    with pytest.raises(ConfigError) as caught:
        load_pipeline(path)
    assert str(caught.value) == ("pipelines/p.yaml:4:34: params.t.minimun: unknown key 'minimun' in the declaration of "
                                 "param 't'. Did you mean 'minimum'?")


def test_the_older_two_block_form_is_refused_with_the_fix(project):
    two = project.pipeline("version: 1\nname: p\nparams:\n  t: 0.5\nparams_schema:\n"
                           "  t: {type: number, maximum: 1}\nsteps: [{id: a, uses: compute, with: {x: 1}}]\n")
    with pytest.raises(ConfigError, match=r"p.yaml:5:1: params_schema: the older form of params, no longer read: "
                                          r"declare .*e.g. `t: \{default: 0.5, type: number, maximum: 1\}`"):
        load_pipeline(two)


def test_a_plain_default_declares_its_type_checked_by_every_set(project):
    path = project.pipeline("version: 1\nname: p\nparams:\n  min_score: 0.6\n  retries: 2\n  name: x\n"
                            "  nothing: null\nsteps: [{id: a, uses: compute, with: {x: 1}}]\n")
    assert load_pipeline(path).params_schema == {"min_score": {"type": "number"}, "retries": {"type": "integer"},
                                                 "name": {"type": "string"}}
    with pytest.raises(ConfigError, match=r"params.min_score: 'abc' is not of type 'number'"):
        load_pipeline(path, ["params.min_score=abc"])
    with pytest.raises(ConfigError, match=r"params.retries: 2.5 is not of type 'integer'"):
        load_pipeline(path, ["params.retries=2.5"])
    assert load_pipeline(path, ["params.min_score=1", "params.name=2024", "params.nothing=[1]"]).params == {
        "min_score": 1, "retries": 2, "name": "2024", "nothing": [1]}     # a string param takes the text as given


def test_a_variants_plain_value_keeps_the_bases_declaration(project):
    project.pipeline("version: 1\nname: p\nparams:\n  t: {default: 0.5, type: [number, 'null'], maximum: 1}\n"
                     "steps: [{id: a, uses: compute, with: {x: 1}}]\n", "base.yaml")
    variant = project.pipeline("extends: base.yaml\nparams:\n  t: 0.7\n", "variant.yaml")
    loaded = load_pipeline(variant)
    assert (loaded.params, loaded.params_schema) == ({"t": 0.7}, {"t": {"type": ["number", "null"], "maximum": 1}})


def test_runner_params_lists_them(project, cli):
    path = project.pipeline(BASE, "base.yaml")
    said = cli("params", str(path))
    assert said.exit_code == 0, said.output
    lines = said.output.splitlines()
    assert lines[0].split() == ["name", "type", "default", "range", "description"]
    assert lines[1].split(None, 4) == ["threshold", "number", "0.8", "0..1", "share of the quote"]
    assert lines[2].split() == ["label", "-", "low", "low|high"]
    assert lines[3].split() == ["words", "integer", "5"]
