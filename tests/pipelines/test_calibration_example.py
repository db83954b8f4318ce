"""The labelled citation example: recorded jury answers, then eval and sweep offline."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("calibration_example")  # its module fixture is made once

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "citation_judge"
PIPELINE = REPO / "pipelines" / "citation_judge.yaml"
ENABLE = ["--set", "models.gemini.enabled=true", "--set", "models.openai.enabled=true"]
LABELS = ["--labels", "labelled/labels.jsonl", "--key", "index", "--truth", "verdict"]


def recorder():
    spec = importlib.util.spec_from_file_location("record_answers", EXAMPLE / "labelled" / "record_answers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    work = tmp_path_factory.mktemp("labelled") / "example"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("cache", "reports"))
    calls = recorder().record(work / "labelled" / "cache", work)
    return work, calls


def test_labelled_set_covers_every_class():
    labels = [json.loads(line) for line in (EXAMPLE / "labelled" / "labels.jsonl").read_text().splitlines()]
    assert len(labels) >= 40 and [row["index"] for row in labels] == list(range(1, len(labels) + 1))
    assert {"exact", "typography", "typo", "changed_number", "dropped_negation", "splice", "out_of_context",
            "unsupported"} <= {row["class"] for row in labels}
    from runner.inputs.markdown_citations import extract_citations
    assert len(extract_citations((EXAMPLE / "labelled" / "report.md").read_text())) == len(labels)


def test_eval_and_sweep_run_offline_from_the_recorded_answers(recorded, cli, monkeypatch):
    work, calls = recorded
    assert calls == 47 * 3 * 2                      # every citation, three seats, context_lines 3 and 5
    monkeypatch.chdir(work)
    result = cli("eval", str(PIPELINE), "--input", "labelled/report.md", *LABELS, "--cache-dir", "labelled/cache",
                 "--out", "run", *ENABLE, "--fail-under-kappa", "0.8")
    assert result.exit_code == 0, result.output
    report = json.loads((work / "run" / "eval.json").read_text())
    assert report["scored"] == 47 and report["metrics"]["accuracy"] == 0.8723
    assert report["metrics"]["baseline"] == {"predicts": "VALID", "accuracy": 0.4255, "kappa": 0.0,
                                             "macro_f1": 0.0995, "balanced_accuracy": 0.2}   # 1 of 5 labels
    seats = report["jurors"]["models"]
    assert seats["local"]["accuracy"] < seats["gemini"]["accuracy"] < seats["openai"]["accuracy"] < 1
    summary = json.loads((work / "run" / "summary.json").read_text())
    assert {m["calls"] for m in summary["models"].values()} == {0}          # all from the cache
    sweep = cli("sweep", str(PIPELINE), "--input", "labelled/report.md", *LABELS, "--cache-dir", "labelled/cache",
                *ENABLE, "--grid", "params.quote_threshold=0.8,0.95", "--grid", "params.context_lines=3,5",
                "--out", "sweep")
    assert sweep.exit_code == 0, sweep.output
    settings = json.loads((work / "sweep" / "sweep.json").read_text())["settings"]
    assert {s["status"] for s in settings} == {"cached"}
    assert "Best: --set params.quote_threshold=0.95 --set params.context_lines=5" in sweep.output


# The seat's answers are keyed by its cache_as name, whatever the URL: one URL in the default run,
# the other under `-m slow` (the same path, an eval of 141 recorded answers each).
@pytest.mark.parametrize("exported", ["HTTP://127.0.0.1:1234/v1/",
                                      pytest.param("http://localhost:11434/v1", marks=pytest.mark.slow)])
def test_eval_reproduces_the_readme_with_local_llm_base_url_exported(recorded, cli, monkeypatch, exported):
    """The README tells Ollama and llama.cpp users to export LOCAL_LLM_BASE_URL: the
    recorded answers of the `local` seat (cache_as: local) are found all the same."""
    work, _ = recorded
    monkeypatch.chdir(work)
    monkeypatch.setenv("LOCAL_LLM_BASE_URL", exported)
    result = cli("eval", str(PIPELINE), "--input", "labelled/report.md", *LABELS, "--cache-dir", "labelled/cache",
                 "--out", "exported", *ENABLE)
    assert result.exit_code == 0, result.output
    assert "accuracy 0.8723 (always VALID: 0.4255), kappa 0.8186" in result.output
    assert "juror local: accuracy 0.6875, kappa 0.4234 on 32 item(s)" in result.output
    summary = json.loads((work / "exported" / "summary.json").read_text())
    assert {m["calls"] for m in summary["models"].values()} == {0}
