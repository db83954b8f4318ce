"""One way to run items (issue 61): the same items through every entry point and executor give
what `runner run` gives on this machine (the baseline, run first in each test): the same
per-item results (verdicts and every value a result carries, but timings), the same per-item
errors, the same counts (items, judged, errors, by verdict), the same rates and fields in
summary.json and the same exit code (a job: `succeeded` where the run exits 0).

The items are each shipped pipeline's example and an outsider's judge
(tests/differential_cases.py). Each (entry point, case) is its own test. A comparison that
today's main gets wrong is marked `xfail(strict=True)` with the issue and the finding: the
assertion stays as it should be, and the marker goes when the fix is merged."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from differential_cases import BY_NAME, CASES, Case, write_project
from fakellm import FakeLLM
from helpers import run
from runner.llm.calls.record import format_messages
from runner.testing import Script, ScriptedModel

# What differs between any two runs of the same items, left out of every comparison.
VOLATILE = {"latency_ms", "duration_ms", "timestamp", "trace_id", "mlflow_trace_id", "started", "ended",
            "started_at", "finished_at", "ended_at", "duration_s", "out_dir", "elapsed_s"}
# summary.json's parts that say how the calls were made, not what the items gave
HOW = {"models", "batches", "run_warnings", "hints"}


def untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


@dataclass
class Outcome:
    """What an entry point gave for a case's items, in the terms every entry point shares."""

    results: list[dict[str, Any]]        # by item, in input order, without timings
    counts: dict[str, Any]               # items, judged, errors, by verdict
    summary: dict[str, Any] | None       # summary.json without timings and call accounting (None: none written)
    exit: int | None                     # the exit code, or what stands for it (a job: 0 when it succeeded)


def by_verdict(results: list[dict[str, Any]], count_by: str | None) -> dict[str, int]:
    """Results by `count_by` as summary.json counts them (an errored item: ERROR)."""
    by = Counter("ERROR" if r.get("error") else str(r.get(count_by)) for r in results) if count_by else Counter()
    return dict(sorted(by.items()))


def in_folder(value: Any, folder: Path) -> Any:
    """`value` with the run folder's path, where it names it (a memo store inside it), as <OUT>."""
    if isinstance(value, dict):
        return {k: in_folder(v, folder) for k, v in value.items()}
    if isinstance(value, list):
        return [in_folder(v, folder) for v in value]
    if isinstance(value, str):
        value = value.replace(str(folder), "<OUT>")
        return "<OUT>" + value[len(folder.name):] if value.startswith(f"{folder.name}/") else value
    return value


def summary_part(summary: dict[str, Any], folder: Path) -> dict[str, Any]:
    kept = {k: v for k, v in in_folder(untimed(summary), folder).items() if k not in HOW}
    if "error_groups" in kept:      # groups of equal count come in no fixed order
        kept["error_groups"] = sorted(kept["error_groups"], key=lambda g: (-g["count"], g["error"]))
    return kept


def folder_outcome(folder: Path, exit_code: int | None) -> Outcome:
    """A run folder's results and summary."""
    results = [untimed(json.loads(line)) for line in (folder / "results.jsonl").read_text().splitlines()]
    results.sort(key=lambda r: r["index"])
    summary = json.loads((folder / "summary.json").read_text())
    errors = int(summary["errors"])     # results with an error, and those whose calls failed (an LLM_ERROR verdict)
    counts = {"items": summary["total"], "judged": summary["total"] - errors, "errors": errors,
              "by_verdict": dict(sorted((summary.get("counts") or {}).items()))}
    assert summary["total"] == len(results)
    return Outcome(results, counts, summary_part(summary, folder), exit_code)


# ---- a case set up in a test --------------------------------------------------------------------


@dataclass
class Setup:
    case: Case
    root: Path
    pipeline: Path
    script: Script
    url: str | None

    def answer(self) -> Script:
        """The script's rules afresh (a run's replies start again from the first)."""
        self.script.reset()
        self.case.script(self.script)
        return self.script

    @property
    def rel(self) -> str:
        return str(self.pipeline.relative_to(self.root))

    def cli(self, *args: str) -> Any:
        return run_cli(*args, env={"RUNNER_CACHE_DIR": str(self.root / "cache")})

    def baseline(self, out: str = "baseline") -> Outcome:
        """`runner run` with the local executor: what every other entry point must give."""
        self.answer()
        done = self.cli("run", self.rel, "--input", self.case.input, "--out", out,
                        "--cache-dir", str(self.root / f"cache-{out}"))
        assert "Traceback" not in done.output, done.output
        return folder_outcome(self.root / out, done.exit_code)


def set_up(case_name: str, root: Path, script: Script, url: str | None, monkeypatch: pytest.MonkeyPatch) -> Setup:
    case = BY_NAME[case_name]
    project = root / "project"
    pipeline = write_project(case, project, url)
    monkeypatch.chdir(project)
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(project / "cache"))
    return Setup(case, project, pipeline, script, url)


@pytest.fixture
def in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], Setup]]:
    """A case whose models answer in this process (the scripted model)."""
    model = ScriptedModel().install()
    yield lambda name: set_up(name, tmp_path, model, None, monkeypatch)
    model.uninstall()


@pytest.fixture
def over_http(tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Setup]:
    """A case whose models answer over HTTP (the fake server): for other processes."""
    return lambda name: set_up(name, tmp_path, fake_llm, fake_llm.url, monkeypatch)


def assert_same(got: Outcome, expected: Outcome) -> None:
    assert got.results == expected.results
    assert got.counts == expected.counts
    if got.summary is not None:
        assert got.summary == expected.summary
    if got.exit is not None:
        assert got.exit == expected.exit


# ---- which (entry point, case) pairs are known to differ on today's main --------------------------

KNOWN: dict[tuple[str, str], str] = {}


# The outsider's judge runs by default (a few items, a second each); the shipped examples are
# slow (tens of calls each): `-m slow` or `-m ""` runs them.
FAST = ("tickets", "tickets_all_failing")


def cases(entry: str, names: tuple[str, ...] | None = None, slow: bool = False) -> list[Any]:
    """The parameters of one entry point: each case (of `names`), xfail where KNOWN says so;
    `slow`: every case is slow (the entry point is)."""
    chosen = [c.name for c in CASES if names is None or c.name in names]
    params = []
    for name in chosen:
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN[(entry, name)])] if (entry, name) in KNOWN else []
        if slow or name not in FAST:
            marks.append(pytest.mark.slow)
        params.append(pytest.param(name, id=name, marks=marks))
    return params


# ---- the entry points -------------------------------------------------------------------------------


@pytest.mark.parametrize("case", cases("api"))
def test_the_python_api(case: str, in_process: Callable[[str], Setup]) -> None:
    setup = in_process(case)
    expected = setup.baseline()
    setup.answer()
    outcome = run(setup.pipeline, Path(setup.case.input), out="api",
                  cache_dir=setup.root / "cache-api")
    got = folder_outcome(setup.root / "api", None)
    assert_same(got, expected)
    assert untimed(sorted(outcome.results, key=lambda r: r["index"])) == expected.results
    assert summary_part(outcome.summary, outcome.out_dir) == expected.summary


RENDERED = re.compile(r"--- LLM call: model (\S+) \(.*?\) \[(?:not )?cached\] ---\nendpoint: [^\n]*\n(.*?)\n--- end ---\n",
                      re.S)


def rendered_prompts(output: str) -> dict[int, list[tuple[str, str]]]:
    """`runner render`'s output: each item's (model, prompt) in the order printed."""
    prompts: dict[int, list[tuple[str, str]]] = {}
    for block in re.split(r"^=== item (\d+) ===\n", output, flags=re.M)[1:]:
        if block.isdigit():
            number = int(block)
            prompts[number] = []
            continue
        prompts[number] = [(model, text) for model, text in RENDERED.findall(block)]
    return prompts


@pytest.mark.parametrize("case", cases("render"))
def test_render_shows_the_prompts_a_run_sends(case: str, in_process: Callable[[str], Setup]) -> None:
    """`runner render` over a real run's cache: each item's prompts are those its calls.jsonl
    records (an item whose call failed: up to that call, which has no answer to go on with)."""
    setup = in_process(case)
    expected = setup.baseline()
    calls_file = setup.root / "baseline" / "calls.jsonl"
    calls = [json.loads(line) for line in calls_file.read_text().splitlines()] if calls_file.exists() else []
    sent: dict[int, list[tuple[str, str]]] = {}
    failed: set[int] = set()
    for call in calls:
        sent.setdefault(call["item"], []).append((call["model"], format_messages(call["messages"])))
        if call["error"]:
            failed.add(call["item"])
    setup.script.reset()            # render sends nothing: any call reaching the model fails the test
    done = setup.cli("render", setup.rel, "--input", setup.case.input, "--cache-dir",
                     str(setup.root / "cache-baseline"))
    assert done.exit_code == 0, done.output
    assert setup.script.requests == []
    shown = rendered_prompts(done.output)
    assert sorted(shown) == [r["index"] for r in expected.results]
    for item, prompts in shown.items():
        if item in failed:
            assert Counter(prompts) <= Counter(sent[item]), item
        else:
            assert sorted(prompts) == sorted(sent.get(item, [])), item
