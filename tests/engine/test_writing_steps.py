"""docs/writing-pipelines.md's "Adding a step type" example, run as written: one module plus one schema
make a step type that validate checks and a run uses."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from unittest.mock import ANY

import pytest

import runner.pipeline.step_catalog as base
from helpers import run
from runner.errors import ConfigError
from runner.pipeline.loader import load_pipeline

DOC = Path(__file__).resolve().parents[2] / "docs" / "writing-pipelines.md"


def readme_blocks(language: str) -> list[str]:
    section = DOC.read_text(encoding="utf-8").split("### Adding a step type", 1)[1]
    section = re.split(r"\n#{2,3} ", section, maxsplit=1)[0]          # up to the next heading
    return re.findall(rf"```{language}\n(.*?)```", section, re.DOTALL)


@pytest.fixture
def word_count(monkeypatch):
    (source,) = readme_blocks("python")
    (schema,) = readme_blocks("json")
    name = "runner.engine.steps.word_count"
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "runner.engine.steps"
    monkeypatch.setitem(sys.modules, name, module)
    original = base.step_schema
    monkeypatch.setattr(base, "step_schema", lambda n: json.loads(schema) if n == "word_count" else original(n))
    base.STEPS.names()                                   # built-ins first, then the new one
    exec(compile(source, "docs/writing-pipelines.md", "exec"), module.__dict__)
    yield
    base.STEPS.remove("word_count")


def test_the_readme_step_type_validates_and_runs(project, word_count):
    path = project.pipeline("""
        version: 1
        name: w
        steps: [{id: count, uses: word_count, with: {text: "{{ item.text }}"}}]
        output: {words: "{{ steps.count.words }}"}
        """)
    (result,) = run(path, records=["text=three little words"]).results
    assert result == {"index": 1, "item_key": ANY, "words": 3}
    bad = project.pipeline("""
        version: 1
        name: w
        steps: [{id: count, uses: word_count, with: {txt: a}}]
        output: {words: "{{ steps.count.word }}"}
        """, "bad.yaml")
    with pytest.raises(ConfigError) as caught:
        load_pipeline(bad)
    assert [p.message for p in caught.value.problems] == [
        "'text' is required", "unknown key 'txt'. Did you mean 'text'?",
        "steps.count.word: step 'count' has no field 'word'. Did you mean 'words'?"]
