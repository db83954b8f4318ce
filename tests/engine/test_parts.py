"""`uses: pipeline`: a part (a pipeline file with typed inputs) run as one step, used twice;
its inputs checked at validate time; its problems located in its own file; cycles named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakellm import Reply
from helpers import run, write_json
from runner.errors import ConfigError
from runner.pipeline.loader import load_pipeline

PART = """
version: 1
name: check
env: [FAKE_URL]
models:
  judge: {model: openai/judge, api_base: "{{ env.FAKE_URL }}", retries: 0}
inputs:
  quotes: {type: array, description: the quotes to find}
  threshold: {type: number, minimum: 0, maximum: 1, default: 0.8}
steps:
  - id: each
    uses: foreach
    with:
      items: "{{ inputs.quotes }}"
      as: quote
      steps: [{id: match, uses: quote_match, with: {quote: "{{ quote }}", text: "{{ item.text }}",
                                                   threshold: "{{ inputs.threshold }}"}}]
      output: "{{ steps.match.passed }}"
  - id: ask
    uses: llm
    with: {model: judge, prompt: ask.j2, json: true}
output:
  found: "{{ steps.each | select | list | length }}"
  answer: "{{ steps.ask.output }}"
"""

CALLER = """
version: 1
name: caller
env: [FAKE_URL]
steps:
  - id: first
    uses: pipeline
    with: {{file: parts/check.yaml, inputs: {{quotes: "{{{{ item.first }}}}"}}}}
  - id: second
    uses: pipeline
    with: {{file: parts/check.yaml, inputs: {{quotes: "{{{{ item.second }}}}", {extra}}}}}
output:
  first: "{{{{ steps.first.found }}}}"
  second: "{{{{ steps.second.found }}}}"
  answer: "{{{{ steps.second.answer.ok }}}}"
  calls: "{{{{ steps.first.calls + steps.second.calls }}}}"
"""


@pytest.fixture
def parts(project, fake_llm, monkeypatch):
    monkeypatch.setenv("FAKE_URL", fake_llm.url)
    project.prompt("ask.j2", "Is it fine? {{ inputs.quotes | join(', ') }}\n")
    project.file("pipelines/parts/check.yaml", PART)
    return project


def test_a_part_used_twice_with_its_own_inputs(parts, fake_llm):
    fake_llm.script(Reply(json.dumps({"ok": True})))
    path = parts.pipeline(CALLER.format(extra="threshold: 0.99"))
    assert [p.name for p in load_pipeline(path).sources] == ["p.yaml", "check.yaml"]   # run.json lists both
    items = write_json(parts.root / "in.json", [{"text": "the cat sat on the mat", "first": ["the cat", "a dog"],
                                                  "second": ["cat sat", "on the mat", "sat on"]}])
    result = run(path, items).results[0]
    assert (result["first"], result["second"], result["answer"], result["calls"]) == (1, 3, True, 2)
    prompts = sorted(c.prompt for c in fake_llm.calls())
    assert prompts[0].startswith("Is it fine? cat sat, on the mat, sat on")


@pytest.mark.parametrize(("extra", "message"), [
    ("threshold: 2", "pipelines/p.yaml:10:85: steps[1].with.inputs.threshold: input 'threshold' of part "
                     "'parts/check.yaml': 2 is greater than the maximum of 1"),
    ("treshold: 0.9", "steps[1].with.inputs.treshold: part 'parts/check.yaml' has no input 'treshold'. "
                      "Did you mean 'threshold'?"),
])
def test_inputs_are_checked_at_validate_time(parts, extra, message):
    with pytest.raises(ConfigError) as caught:
        load_pipeline(parts.pipeline(CALLER.format(extra=extra)))
    assert message in str(caught.value)


def test_a_missing_input_and_a_wrong_part_are_located(parts):
    text = CALLER.format(extra="threshold: 0.5").replace('{quotes: "{{ item.first }}"}', "{}")
    with pytest.raises(ConfigError) as caught:
        load_pipeline(parts.pipeline(text))
    assert "steps[0].with.inputs: part 'parts/check.yaml' needs input 'quotes'" in str(caught.value)
    parts.file("pipelines/parts/check.yaml", PART.replace("quote_match", "quote_mtach"))
    with pytest.raises(ConfigError) as caught:
        load_pipeline(parts.pipeline(text))
    assert "pipelines/parts/check.yaml:15:33: steps[0].with.steps[0].uses" in str(caught.value) and "unknown step type 'quote_mtach'" in str(caught.value)


def test_a_part_that_runs_itself_is_refused_with_the_chain(parts):
    parts.file("pipelines/parts/loop.yaml", """
version: 1
name: loop
steps:
  - {id: again, uses: pipeline, with: {file: parts/loop.yaml}}
""")
    path = parts.pipeline("version: 1\nname: c\nsteps:\n  - {id: p, uses: pipeline, with: {file: parts/loop.yaml}}\n")
    with pytest.raises(ConfigError) as caught:
        load_pipeline(path)
    assert "the part runs itself: loop.yaml -> loop.yaml" in str(caught.value)


@pytest.mark.slow      # worker processes
def test_a_part_runs_in_worker_processes(parts, fake_llm, cli):
    fake_llm.script(Reply(json.dumps({"ok": True})))
    path = parts.pipeline(CALLER.format(extra="threshold: 0.99"))
    items = write_json(parts.root / "in.json", [{"text": "the cat sat", "first": ["the cat"], "second": ["a dog"]},
                                                 {"text": "a dog ran", "first": ["a dog"], "second": ["a dog ran"]}])
    done = cli("run", str(path), "--input", str(items), "--out", "out", "--executor", "processes", "--workers", "2")
    assert done.exit_code == 0, done.output
    results = sorted(parts.results(), key=lambda r: r["index"])
    assert [(r["first"], r["second"], r["calls"]) for r in results] == [(1, 0, 2), (1, 1, 2)]


@pytest.fixture
def part_reads(monkeypatch):
    """The part files the loader reads, by name."""
    import runner.pipeline.loader as loader
    names: list[str] = []
    real = loader.read_located

    def counted(file, *args, **kwargs):
        names.append(Path(file).name)
        return real(file, *args, **kwargs)
    monkeypatch.setattr(loader, "read_located", counted)
    return names


def test_a_part_is_read_and_checked_once_however_many_steps_run_it(parts, fake_llm, cli, part_reads):
    fake_llm.script(Reply(json.dumps({"ok": True})))
    path = parts.pipeline(CALLER.format(extra="threshold: 0.99"))
    items = write_json(parts.root / "in.json", [{"text": "the cat sat", "first": ["the cat"], "second": ["a dog"]}])
    assert cli("validate", str(path)).exit_code == 0
    assert part_reads.count("check.yaml") == 1
    part_reads.clear()
    done = cli("run", str(path), "--input", str(items), "--out", "out", "--cache-dir", str(parts.root / "cache"))
    assert done.exit_code == 0, done.output
    assert part_reads.count("check.yaml") == 1
    assert parts.results()[0]["calls"] == 2


def test_a_run_skips_the_checks_of_a_part_its_validated_marker_knows(parts, fake_llm, monkeypatch):
    import runner.pipeline.loader as loader
    from runner.pipeline.validated import ValidatedPipelines
    path = parts.pipeline(CALLER.format(extra="threshold: 0.99"))
    memo = ValidatedPipelines(parts.root / "cache")
    load_pipeline(path, validated=memo)
    checked: list[int] = []
    real = loader.schema_problems
    monkeypatch.setattr(loader, "schema_problems", lambda *a, **k: checked.append(1) or real(*a, **k))
    assert load_pipeline(path, validated=memo).parts["parts/check.yaml"].name == "check"
    assert checked == []
    parts.file("pipelines/parts/check.yaml", PART.replace("default: 0.8", "default: 0.7"))
    assert load_pipeline(path, validated=memo).parts["parts/check.yaml"].name == "check"
    assert checked                  # the part changed: it and its caller are checked again
