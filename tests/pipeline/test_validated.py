"""Pipelines found valid are not checked again until something the checks read changes."""

from __future__ import annotations

import os

import pytest

import runner.pipeline.loader as loader
from runner.errors import ConfigError
from runner.pipeline.loader import load_pipeline
from runner.pipeline.validated import ValidatedPipelines

PIPELINE = """
    version: 1
    name: v
    params: {threshold: {default: 0.5, type: number, maximum: 1}}
    models:
      m: {model: openai/m, api_base: "http://127.0.0.1:9/v1"}
    steps:
      - id: ask
        uses: llm
        with: {model: m, prompt: ask.j2, output_schema: answer.schema.json}
    output:
      verdict: "{{ steps.ask.output.verdict }}"
    """


@pytest.fixture
def valid(project):
    project.prompt("ask.j2", "Question {{ item.q }}\n")
    project.schema("answer.schema.json", {"type": "object", "properties": {"verdict": {"type": "string"}}})
    return project.pipeline(PIPELINE)


@pytest.fixture
def memo(project):
    return ValidatedPipelines(project.root / "cache")


@pytest.fixture
def checks(monkeypatch):
    """Counts the schema checks the loader runs."""
    calls = []
    real = loader.schema_problems

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(loader, "schema_problems", counted)
    return calls


def test_a_pipeline_found_valid_is_not_checked_again(valid, memo, checks):
    first = load_pipeline(valid, validated=memo)
    assert checks and len(list(memo.folder.iterdir())) == 1
    checks.clear()
    again = load_pipeline(valid, validated=memo)
    assert checks == []
    assert again.steps == first.steps and again.params == first.params


def test_validate_and_an_unremembered_load_always_check(valid, memo, checks, cli):
    load_pipeline(valid, validated=memo)
    checks.clear()
    load_pipeline(valid)
    assert checks
    checks.clear()
    assert cli("validate", str(valid)).exit_code == 0
    assert checks


@pytest.mark.parametrize("change, message", [
    (lambda p: p.pipeline(PIPELINE.replace("name: v", "name: v\n    extra: 1")), "unknown key 'extra'"),
    (lambda p: p.prompt("ask.j2", "Question {{ item.q }\n"), "prompt template 'ask.j2' line 1"),
    (lambda p: p.prompt("ask.j2", "Question {{ steps.nothing }}\n"), "nothing"),
    (lambda p: (p.root / "schemas" / "answer.schema.json").write_text('{"type": 3}'),
     "schema 'answer.schema.json' is not a valid JSON Schema"),
])
def test_any_change_the_checks_read_checks_again(project, valid, memo, change, message):
    load_pipeline(valid, validated=memo)
    change(project)
    with pytest.raises(ConfigError) as raised:
        load_pipeline(valid, validated=memo)
    assert message in str(raised.value)


def test_a_bad_override_of_a_valid_pipeline_is_still_refused(valid, memo):
    load_pipeline(valid, ["params.threshold=0.9"], validated=memo)
    with pytest.raises(ConfigError) as raised:
        load_pipeline(valid, ["params.threshold=2"], validated=memo)
    assert "params.threshold: 2 is greater than the maximum of 1" in str(raised.value)
    assert load_pipeline(valid, ["params.threshold=0.9"], validated=memo).params["threshold"] == 0.9


def test_an_unusable_cache_folder_only_means_the_checks_run(project, valid, checks):
    (project.root / "cache").write_text("not a folder")
    memo = ValidatedPipelines(project.root / "cache")
    load_pipeline(valid, validated=memo)
    first = len(checks)
    load_pipeline(valid, validated=memo)
    assert first > 0 and len(checks) == 2 * first


def test_a_fifo_in_the_prompts_folder_does_not_block_the_fingerprint(project, valid, memo):
    os.mkfifo(project.root / "prompts" / "pipe.j2")
    assert load_pipeline(valid, validated=memo).name == "v"
    assert load_pipeline(valid, validated=memo).name == "v"
