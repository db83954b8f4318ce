"""`defaults:` says once per step type what a failure does; a step's own on_error and
default win; a wrong value is located where `defaults:` wrote it."""

from __future__ import annotations

import pytest

from fakellm import Reply
from helpers import run, write_json
from runner.errors import ConfigError
from runner.pipeline.loader import load_pipeline

PIPELINE = """
version: 1
name: d
env: [FAKE_URL]
models:
  judge: {{model: openai/judge, api_base: "{{{{ env.FAKE_URL }}}}", retries: 0}}
defaults:
  llm: {{on_error: {on_error}, default: {{failed: true, message: "{{{{ error }}}}"}}}}
steps:
  - id: first
    uses: llm
    with: {{model: judge, prompt: ask.j2, json: true}}
  - id: each
    uses: foreach
    with:
      items: [1]
      as: k
      steps: [{{id: inner, uses: llm, with: {{model: judge, prompt: ask.j2, json: true}}}}]
  - id: strict
    uses: llm
    on_error: fail
    with: {{model: judge, prompt: ask.j2, json: true}}
output:
  failed: "{{{{ [steps.first.failed, steps.each[0].inner.failed] }}}}"
  output: "{{{{ steps.first.output }}}}"
  message: "{{{{ steps.first.message }}}}"
"""


def test_a_failure_default_said_once_per_step_type(project, fake_llm, monkeypatch):
    monkeypatch.setenv("FAKE_URL", fake_llm.url)
    project.prompt("ask.j2", "Judge {{ item.n }}\n")
    fake_llm.script(Reply(status=500))
    path = project.pipeline(PIPELINE.format(on_error="default"))
    pipeline = load_pipeline(path)
    assert [(s.on_error, s.default) for s in pipeline.steps] == [
        ("default", {"failed": True, "message": "{{ error }}"}), ("fail", None), ("fail", None)]
    assert pipeline.steps[1].substeps[0].on_error == "default"
    outcome = run(path, write_json(project.root / "in.json", [{"n": 1}]))
    result = outcome.results[0]
    assert result["failed"] == [True, True]
    assert result.get("output") is None          # the default laid over the empty value of `output`
    assert "HTTP 500" in result["message"]
    assert result["error"].startswith("step 'strict': ")  # its own on_error wins


def test_a_wrong_default_is_located_in_defaults(project):
    project.prompt("ask.j2", "Judge\n")
    path = project.pipeline(PIPELINE.format(on_error="defualt") + "\n")
    with pytest.raises(ConfigError) as caught:
        load_pipeline(path)
    assert str(caught.value).splitlines() == [
        "pipelines/p.yaml:7:19: defaults.llm.on_error: 'defualt' is not one of ['fail', 'continue', 'default']"]


def test_an_unknown_step_type_in_defaults_is_named(project):
    project.prompt("ask.j2", "Judge\n")
    path = project.pipeline(PIPELINE.format(on_error="default").replace("  llm: {", "  lmm: {"))
    with pytest.raises(ConfigError) as caught:
        load_pipeline(path)
    assert "pipelines/p.yaml:7:3: defaults.lmm: unknown step type 'lmm'. Did you mean 'llm'?" in str(caught.value)
