"""The stricter citation judge: a variant of a few lines (`extends:` plus one param) that
keeps everything else of its base; a variant with a wrong key is refused where it wrote it."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import copy_example
from runner.errors import ConfigError
from runner.pipeline.loader import load_pipeline

REPO = Path(__file__).resolve().parents[2]
STRICT = REPO / "pipelines" / "citation_judge_strict.yaml"


def test_the_strict_variant_is_the_base_with_a_higher_threshold():
    assert len(STRICT.read_text(encoding="utf-8").splitlines()) <= 10
    base, strict = load_pipeline(REPO / "pipelines" / "citation_judge.yaml"), load_pipeline(STRICT)
    assert strict.name == "citation_judge_strict"
    assert strict.params == {**base.params, "quote_threshold": 0.95}
    assert strict.params_schema == base.params_schema
    assert strict.steps == base.steps and strict.output == base.output and strict.models == base.models
    assert [f"{p.parent.name}/{p.name}" for p in strict.sources] == [
        "pipelines/citation_judge_strict.yaml", "pipelines/citation_judge.yaml", "probes/citation_judge.yaml"]


def test_the_strict_variant_lists_its_params(cli):
    shown = cli("params", str(STRICT))
    assert shown.exit_code == 0
    assert "quote_threshold" in shown.output and "0.95" in shown.output


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    for folder in ("pipelines", "prompts", "schemas", "probes"):
        copy_example(REPO / folder, tmp_path / folder)
    return tmp_path / "pipelines"


def test_a_variant_with_a_wrong_key_is_refused_at_its_line(copy: Path, cli):
    variant = copy / "citation_judge_lax.yaml"
    variant.write_text("extends: citation_judge.yaml\nparams:\n  quote_threshold: 0.5\nmodel:\n  local: {}\n",
                       encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_pipeline(variant)
    assert str(caught.value).endswith("citation_judge_lax.yaml:4:1: model: unknown key 'model'. "
                                      "Did you mean 'models'?")
    said = cli("validate", str(variant))
    assert said.exit_code == 2
    assert "citation_judge_lax.yaml:4:1: model: unknown key 'model'" in said.output
