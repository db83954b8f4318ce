"""One way to run items (issue 61): the same items through every entry point and executor give
what `runner run` with the local executor gives (the baseline, run once a session for each
case and transport, in the test that first needs it): the same
per-item results (verdicts and every value a result carries, but timings), the same per-item
errors, the same counts (items, judged, errors, by verdict), the same rates and fields in
summary.json and the same exit code (a job: `succeeded` where the run exits 0).

The items are each shipped pipeline's example and an outsider's judge, also over a rougher
file (tests/differential_cases.py). Each (entry point, case) is its own test. Beside the
entry points, the ways a run takes results it did not compute give what the run gives: a
rerun from the memo store, a job after /judge stored its items, a `--failed-from` rerun;
and standard input, or an upload under any name, reads as the file does. A comparison that
today's main gets wrong is marked `xfail(strict=True)` with the issue and the finding: the
assertion stays as it should be, and the marker goes when the fix is merged (KNOWN lists them).

By default the outsider's judge runs through the in-process entry points (a few seconds); the
shipped examples, a job sent as JSON, `runner run` in its own process and the executors
(worker processes, a provider's batch API, Ray: `-m ray`) are slow."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
from differential_cases import BY_NAME, CASES, Case, write_project

from fakellm import FakeLLM
from helpers import run, run_cli
from runner.llm.calls.record import format_messages
from runner.pipeline.loader import load_pipeline
from runner.testing import Reply, Script, ScriptedModel
from serve_fixtures import make_client

# What differs between any two runs of the same items, left out of every comparison.
VOLATILE = {"latency_ms", "duration_ms", "timestamp", "trace_id", "mlflow_trace_id", "started", "ended",
            "started_at", "finished_at", "ended_at", "duration_s", "out_dir", "elapsed_s"}
JUROR = re.compile(r"model '[^']+' \([^)]*\)")
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


def summary_part(summary: dict[str, Any]) -> dict[str, Any]:
    """summary.json as compared: without timings, call accounting, and where the memo store
    lives (beside the run, or a job's group folder); its counts stay."""
    kept = {k: v for k, v in untimed(summary).items() if k not in HOW}
    if "memo" in kept:
        kept["memo"] = {k: v for k, v in kept["memo"].items() if k != "store"}
    if "error_groups" in kept:
        # An item whose jurors all fail counts under the error of the call that failed last,
        # which a race decides (in a local run too): the groups are compared by what failed,
        # whichever juror it was, and how often.
        groups: Counter[str] = Counter()
        for group in kept["error_groups"]:
            groups[JUROR.sub("model M", group["error"])] += group["count"]
        kept["error_groups"] = sorted(groups.items())
    return kept


def folder_outcome(folder: Path, exit_code: int | None) -> Outcome:
    """A run folder's results and summary."""
    text = (folder / "results.jsonl").read_text()
    assert str(folder.parent.parent) not in text + (folder / "summary.json").read_text()    # tmp_path: none of its own
    results = [untimed(json.loads(line)) for line in text.splitlines()]
    results.sort(key=lambda r: r["index"])
    summary = json.loads((folder / "summary.json").read_text())
    errors = int(summary["errors"])     # results with an error, and those whose calls failed (an LLM_ERROR verdict)
    counts = {"items": summary["total"], "judged": summary["total"] - errors, "errors": errors,
              "by_verdict": dict(sorted((summary.get("counts") or {}).items()))}
    assert summary["total"] == len(results)
    return Outcome(results, counts, summary_part(summary), exit_code)


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

    def run_baseline(self) -> Outcome:
        """`runner run` with the local executor, in this project (folder `baseline`, its cache
        `cache-baseline`): what every other entry point must give."""
        self.answer()
        done = self.cli("run", self.rel, "--input", self.case.input, "--out", "baseline",
                        "--cache-dir", str(self.root / "cache-baseline"))
        assert "Traceback" not in done.output, done.output
        return folder_outcome(self.root / "baseline", done.exit_code)

    def baseline(self) -> Outcome:
        """The baseline, run once a session for each case and transport (a case's project is
        the same wherever it is written: nothing in an outcome names its folder)."""
        key = (self.case.name, self.url)
        if key not in BASELINES:
            BASELINES[key] = self.run_baseline()
        return BASELINES[key]


BASELINES: dict[tuple[str, str | None], Outcome] = {}


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


class Differences:
    """Every comparison of a test, each said by name: one failure lists all that differ."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def check(self, what: str, got: Any, expected: Any) -> None:
        """`got` == `expected`, else what differs: of two lists of one length, each entry that
        differs; of two mappings, each key whose value differs."""
        if got == expected:
            return
        if isinstance(got, list) and isinstance(expected, list) and len(got) == len(expected):
            for number, (one, other) in enumerate(zip(got, expected, strict=True), start=1):
                self.check(f"{what}[{number}]", one, other)
        elif isinstance(got, dict) and isinstance(expected, dict):
            for key in sorted(set(got) | set(expected), key=str):
                self.check(f"{what}.{key}", got.get(key, "<absent>"), expected.get(key, "<absent>"))
        else:
            self.found.append(f"{what}: got {json.dumps(got, default=str)[:1000]}\n"
                              f"  expected {json.dumps(expected, default=str)[:1000]}")

    def same(self, got: Outcome, expected: Outcome, where: str = "") -> None:
        self.check(f"{where}results", got.results, expected.results)
        self.check(f"{where}counts", got.counts, expected.counts)
        if got.summary is not None:
            self.check(f"{where}summary", got.summary, expected.summary)
        if got.exit is not None:
            self.check(f"{where}exit code", got.exit, expected.exit)

    def none(self, output: str = "") -> None:
        """None found (`output`: what the command printed, shown with them)."""
        assert not self.found, "\n".join([*self.found, *([f"output:\n{output[-3000:]}"] if output else [])])


def assert_same(got: Outcome, expected: Outcome, output: str = "") -> None:
    differences = Differences()
    differences.same(got, expected)
    differences.none(output)


# ---- which (entry point, case) pairs are known to differ on today's main --------------------------

KNOWN: dict[tuple[str, str], str] = {}


# The outsider's judge runs by default (a few items, a second each); the shipped examples are
# slow (tens of calls each): `-m slow` or `-m ""` runs them.
FAST = ("tickets", "tickets_all_failing", "tickets_rough")
# The cases whose every row is a record (a refused row has none to send as JSON)
READABLE = tuple(c.name for c in CASES if not c.rough)


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
    assert summary_part(outcome.summary) == expected.summary


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
    expected = setup.run_baseline()
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


def test_error_groups_come_in_one_order(in_process: Callable[[str], Setup]) -> None:
    """summary.json's error_groups, of equal counts, in the order of their first item in the
    input, not in the order the items happened to finish (an item failing without a call
    finishes before one whose calls fail, in one executor and not in another): the rough
    tickets' three errors, one item each, are those of items 4, 6 and 7 in that order."""
    setup = in_process("tickets_rough")
    setup.answer()
    done = setup.cli("run", setup.rel, "--input", setup.case.input, "--out", "ordered", "-q")
    summary = json.loads((setup.root / "ordered" / "summary.json").read_text())
    results = [json.loads(line) for line in (setup.root / "ordered" / "results.jsonl").read_text().splitlines()]
    errored = [r["error"] for r in sorted(results, key=lambda r: r["index"]) if r.get("error")]
    assert [group["error"] for group in summary["error_groups"]] == errored, done.output
    assert [line.split(": ", 1)[1] for line in done.output.splitlines() if line.startswith("1/7 items: ")] == errored
    # a rerun of the last errored item alone takes the others' errors from its parent: the same order
    rerun = setup.cli("run", setup.rel, "--input", setup.case.input, "--failed-from", "ordered", "--item", "7",
                      "--out", "part", "-q")
    assert error_order(setup.root / "part") == error_order(setup.root / "ordered"), rerun.output


@pytest.mark.parametrize("case", cases("stdin", tuple(c.name for c in CASES if c.csv)))
def test_standard_input(case: str, in_process: Callable[[str], Setup]) -> None:
    """`runner run --input -` with the file on standard input: the baseline, the errors of the
    rows it cannot read included (they name the input as the user gave it, not a copy of it)."""
    setup = in_process(case)
    expected = setup.baseline()
    setup.answer()
    done = run_cli("run", setup.rel, "--input", "-", "--out", "stdin", "--cache-dir", str(setup.root / "cache-stdin"),
                   env={"RUNNER_CACHE_DIR": str(setup.root / "cache")},
                   input=(setup.root / setup.case.input).read_text())
    assert "Traceback" not in done.output, done.output
    got = folder_outcome(setup.root / "stdin", done.exit_code)
    expected_results = [{**r, "error": r["error"].replace(setup.case.input, "<stdin>")} if "error" in r else r
                        for r in expected.results]
    assert_same(Outcome(got.results, got.counts, None, got.exit),
                Outcome(expected_results, expected.counts, None, expected.exit), done.output)


# ---- runner serve: /judge and jobs, in process (the app behind FastAPI's TestClient) -------------

@pytest.fixture
def serving(in_process: Callable[[str], Setup]) -> Iterator[Callable[[str], tuple[Setup, Any]]]:
    """A case, and `runner serve` over its project's pipelines (a fresh result store and cache)."""
    clients: list[Any] = []

    def serve(name: str) -> tuple[Setup, Any]:
        setup = in_process(name)
        client = make_client(setup.root, cast(ScriptedModel, setup.script), str(setup.root / "results.sqlite"))
        clients.append(client.__enter__())
        return setup, client
    yield serve
    for client in clients:
        client.__exit__(None, None, None)


def judge_counts(answer: dict[str, Any]) -> dict[str, Any]:
    """/judge's counts in the shared terms: every answer is an item; `judged` and `errors` as it says."""
    return {"items": len(answer["results"]), "judged": answer["counts"].get("judged", 0),
            "errors": answer["counts"].get("errors", 0)}


def source_counts(answer: dict[str, Any]) -> dict[str, int]:
    """/judge's counts as its answers' `source`s say them (`error` counted under `errors`): an
    item counted an error says `source: error`, never judged."""
    sources = Counter("errors" if a["source"] == "error" else a["source"] for a in answer["results"])
    return {key: sources.get(key, 0) for key in answer["counts"]}


def readable(setup: Setup, expected: Outcome) -> tuple[list[Any], Outcome]:
    """The records of the rows the case's reader reads (a refused row has none to send as JSON:
    the rough tickets' is the last), and the baseline over them: its results and counts. (A
    record may explode into several items: a case without refused rows is sent whole.)"""
    if not setup.case.rough:
        return setup.case.records(setup.root), expected
    kept = [(record, result) for record, result in zip(setup.case.records(setup.root), expected.results, strict=True)
            if not str(result.get("error", "")).startswith(setup.case.input)]
    results = [result for _, result in kept]
    errors = expected.counts["errors"] - (len(expected.results) - len(results))
    counts = {"items": len(results), "judged": len(results) - errors, "errors": errors}
    return [record for record, _ in kept], Outcome(results, counts, expected.summary, expected.exit)


@pytest.mark.parametrize("case", cases("judge"))
def test_serve_judge(case: str, serving: Callable[[str], tuple[Setup, Any]]) -> None:
    """POST /v1/pipelines/NAME/judge with the items as JSON: each item's result, and counts
    that say how many were judged and how many errored."""
    setup, client = serving(case)
    records, expected = readable(setup, setup.baseline())
    setup.answer()
    response = client.post(f"/v1/pipelines/{setup.case.pipeline}/judge", json={"items": records})
    assert response.status_code == 200, response.text
    answer = response.json()
    results = [untimed({"index": a["index"], "item_key": a["item_key"], **a["result"]}) for a in answer["results"]]
    differences = Differences()
    differences.check("results", results, expected.results)
    count_by = (expected.summary or {}).get("count_by")
    differences.check("by verdict", by_verdict(results, count_by), by_verdict(expected.results, count_by))
    differences.check("counts", judge_counts(answer), {k: expected.counts[k] for k in ("items", "judged", "errors")})
    differences.check("sources", source_counts(answer), answer["counts"])
    differences.none()


def wait_for(client: Any, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while (job := client.get(f"/v1/jobs/{job_id}").json())["status"] not in ("succeeded", "failed", "cancelled"):
        assert time.monotonic() < deadline, job
        time.sleep(0.02)
    return job


def assert_job_is_the_run(setup: Setup, client: Any, upload: tuple[str, bytes] | None, expected: Outcome) -> None:
    """Send a job (an uploaded file; None: the records as JSON) and wait for it: what it says of
    itself (status, counts), its results as served and its run folder are the baseline's."""
    url = f"/v1/pipelines/{setup.case.pipeline}/jobs"
    submitted = client.post(url, files={"file": upload}) if upload is not None else \
        client.post(url, json={"items": setup.case.records(setup.root)})
    assert submitted.status_code == 202, submitted.text
    job = wait_for(client, submitted.json()["id"])
    items, errors = expected.counts["items"], expected.counts["errors"]
    differences = Differences()
    differences.check("job status", job["status"], "succeeded" if expected.exit == 0 else "failed")
    differences.check("job counts", job["counts"],
                      {"done": items, "errors": errors, "resumed": 0, "store": 0, "memo": 0, "judged": items - errors})
    streamed = [untimed(json.loads(line)) for line in client.get(f"/v1/jobs/{job['id']}/results").text.splitlines()]
    differences.check("results served", streamed, expected.results)
    differences.same(folder_outcome(setup.root / job["run"], None), expected, "the job's run: ")
    differences.none()


@pytest.mark.parametrize("case", cases("jobs_jsonl", READABLE))
def test_serve_job_of_json_lines(case: str, serving: Callable[[str], tuple[Setup, Any]]) -> None:
    """POST /v1/pipelines/NAME/jobs with the items uploaded as JSON lines: its run is the baseline's."""
    setup, client = serving(case)
    expected = setup.baseline()
    setup.answer()
    lines = "".join(json.dumps(record) + "\n" for record in setup.case.records(setup.root))
    assert_job_is_the_run(setup, client, ("items.jsonl", lines.encode()), expected)


@pytest.mark.parametrize("case", cases("jobs_json", READABLE, slow=True))
def test_serve_job_of_json_records(case: str, serving: Callable[[str], tuple[Setup, Any]]) -> None:
    """POST /v1/pipelines/NAME/jobs with the items as a JSON body: its run is the baseline's."""
    setup, client = serving(case)
    expected = setup.baseline()
    setup.answer()
    assert_job_is_the_run(setup, client, None, expected)


@pytest.mark.parametrize("case", cases("jobs_csv", tuple(c.name for c in CASES if c.csv)))
def test_serve_job_of_a_csv_upload(case: str, serving: Callable[[str], tuple[Setup, Any]]) -> None:
    """The same CSV file `runner run` reads, uploaded as a job: read with the pipeline's own
    csv options (`with.types`), so its run is the baseline's."""
    setup, client = serving(case)
    expected = setup.baseline()
    setup.answer()
    upload = (Path(setup.case.input).name, (setup.root / setup.case.input).read_bytes())
    assert_job_is_the_run(setup, client, upload, expected)


@pytest.mark.parametrize("case", cases("jobs_after_judge", FAST))
def test_a_job_after_judge_is_the_run(case: str, serving: Callable[[str], tuple[Setup, Any]]) -> None:
    """One server, as a client uses it: /judge over the items, then the same file as a job. The
    items /judge judged come from the store, the failing one's calls fail again: the job ends as
    `runner run` over the file ends (a stored result a model's answer made counts as an answer
    from the cache does), with the same results."""
    setup, client = serving(case)
    expected = setup.baseline()
    setup.answer()
    judged = client.post(f"/v1/pipelines/{setup.case.pipeline}/judge", json={"items": readable(setup, expected)[0]})
    assert judged.status_code == 200, judged.text
    setup.answer()
    upload = (Path(setup.case.input).name, (setup.root / setup.case.input).read_bytes())
    submitted = client.post(f"/v1/pipelines/{setup.case.pipeline}/jobs", files={"file": upload})
    assert submitted.status_code == 202, submitted.text
    job = wait_for(client, submitted.json()["id"])
    differences = Differences()
    differences.check("job status", job["status"], "succeeded" if expected.exit == 0 else "failed")
    differences.check("job counts", {k: job["counts"][k] for k in ("done", "errors")},
                      {"done": expected.counts["items"], "errors": expected.counts["errors"]})
    streamed = [untimed(json.loads(line)) for line in client.get(f"/v1/jobs/{job['id']}/results").text.splitlines()]
    differences.check("results served", streamed, expected.results)
    differences.check("juror agreement", (folder_outcome(setup.root / job["run"], None).summary or {}).get("juries"),
                      (expected.summary or {}).get("juries"))
    differences.none(json.dumps(job))


MEMO = 'memo: {key: "{{ item.id }}"}\nsteps:\n'


def memo_reruns(setup: Setup, *flags: str) -> tuple[Outcome, Outcome]:
    """The judge keeping its results by content (`memo:`), run twice over the file with a fresh
    LLM cache each time: the second run reuses what the first judged, sends the failing calls
    again, and ends as the first did (exit code, counts, results but `memo_hit`)."""
    setup.pipeline.write_text(setup.pipeline.read_text().replace("steps:\n", MEMO, 1))
    outcomes = []
    for number in (1, 2):           # one folder (--out), where the memo store lives
        setup.answer()
        done = setup.cli("run", setup.rel, "--input", setup.case.input, "--cache-dir", str(setup.root / f"cache-{number}"),
                         "--out", "memo", "-q", *flags)
        assert "Traceback" not in done.output, done.output
        outcomes.append((folder_outcome(setup.root / "memo", done.exit_code), done.output))
    (first, _), (second, output) = outcomes
    judged = sum(1 for r in first.results if not r.get("error"))
    assert (second.summary or {})["memo"]["reused"] == judged, output
    differences = Differences()
    differences.check("results", [{k: v for k, v in r.items() if k != "memo_hit"} for r in second.results],
                      first.results)
    differences.check("counts", second.counts, first.counts)
    differences.check("exit code", second.exit, first.exit)
    differences.none(output)
    return first, second


@pytest.mark.parametrize("case", cases("memo_rerun", FAST))
def test_a_rerun_from_the_memo_store_is_the_run(case: str, in_process: Callable[[str], Setup]) -> None:
    memo_reruns(in_process(case))


@pytest.mark.parametrize("case", cases("memo_rerun_processes", FAST, slow=True))
def test_a_rerun_from_the_memo_store_in_worker_processes_is_the_run(case: str, over_http: Callable[[str], Setup]) -> None:
    """The same in worker processes: each worker's memo hits, and which a model made, reach the run."""
    memo_reruns(over_http(case), *EXECUTORS["processes"])


def test_render_of_a_rerun_from_the_memo_store_shows_the_calls_it_sends(in_process: Callable[[str], Setup]) -> None:
    """The judge keeping its results (`memo:`), run once; `runner render` then shows, for each
    ticket, the prompts the next run sends, which its calls.jsonl records: none for a ticket the
    memo store answers, the jurors' for the one whose calls failed."""
    setup = in_process("tickets")
    setup.pipeline.write_text(setup.pipeline.read_text().replace("steps:\n", MEMO, 1))
    setup.answer()
    first = setup.cli("run", setup.rel, "--input", setup.case.input, "--cache-dir", str(setup.root / "cache-1"), "-q")
    setup.script.reset()            # render sends nothing
    group = setup.root / "reports" / "tickets"
    before = sorted(p.relative_to(group) for p in group.rglob("*"))
    done = setup.cli("render", setup.rel, "--input", setup.case.input, "--cache-dir", str(setup.root / "cache-2"))
    assert done.exit_code == 0 and setup.script.requests == [], done.output
    assert sorted(p.relative_to(group) for p in group.rglob("*")) == before     # read, closed: nothing left
    setup.answer()
    second = setup.cli("run", setup.rel, "--input", setup.case.input, "--cache-dir", str(setup.root / "cache-2"), "-q")
    [folder] = [f for f in (setup.root / "reports" / "tickets").glob("*/*") if f.is_dir() and f.name not in
                first.output]
    sent: dict[int, list[tuple[str, str]]] = {}
    for line in (folder / "calls.jsonl").read_text().splitlines():
        call = json.loads(line)
        sent.setdefault(call["item"], []).append((call["model"], format_messages(call["messages"])))
    shown = rendered_prompts(done.output)
    assert sorted(shown) == [1, 2, 3, 4], done.output
    assert {item: sorted(prompts) for item, prompts in shown.items() if prompts} == \
        {item: sorted(prompts) for item, prompts in sent.items()}, (done.output, second.output)


def test_a_rerun_from_the_memo_store_measures_the_jurors_as_the_run(in_process: Callable[[str], Setup]) -> None:
    first, second = memo_reruns(in_process("tickets"))
    assert (second.summary or {}).get("juries") == (first.summary or {}).get("juries")


def test_a_memo_of_results_no_model_made_is_no_answer(in_process: Callable[[str], Setup]) -> None:
    """With no model answering, a ticket decided without one (a fresh ticket, days < 5) is kept
    and reused; the rerun still ends as its model's failure: no model answered any call (exit 3)."""
    setup = in_process("tickets")
    text = setup.pipeline.read_text().replace("steps:\n", MEMO, 1).replace("  - id: jury\n", (
        "  - id: fresh\n    uses: decide\n    if: \"item.days < 5\"\n"
        "    with: {rules: [{stop: true, verdict: NEW}]}\n  - id: jury\n"), 1)
    text = text.replace("steps.jury.score }}", "steps.jury.score if steps.jury else none }}")
    setup.pipeline.write_text(text.replace("steps.decide.verdict }}", "(steps.decide or steps.fresh).verdict }}"))
    for number in (1, 2):
        setup.script.reset()
        setup.script.script(Reply(status=500))          # every call fails
        done = setup.cli("run", setup.rel, "--input", setup.case.input, "--cache-dir", str(setup.root / f"cache-{number}"),
                         "--out", "memo", "-q")
        summary = json.loads((setup.root / "memo" / "summary.json").read_text())
        assert summary["counts"] == {"NEW": 1, "ERROR": 3}, done.output
        assert done.exit_code == 3, done.output
    assert summary["memo"]["reused"] == 1 and "reused_answered" not in summary


@pytest.mark.parametrize("case", cases("failed_from", FAST))
def test_a_rerun_of_the_failed_items_is_the_run(case: str, in_process: Callable[[str], Setup]) -> None:
    """`--failed-from` the run, with a fresh LLM cache, under a pass rule every judged ticket
    meets (its first rate): only the errored tickets run again, their calls fail again, and the
    merged run (the parent's results for the rest) ends as the run did: the same results,
    counts, rates and exit code (the parent's results a model answered count as its answers)."""
    setup = in_process(case)
    setup.pipeline.write_text(setup.pipeline.read_text().replace(
        "rates: {kept:", "rates: {judged: \"{{ result.verdict is defined }}\", kept:", 1))
    expected = setup.run_baseline()
    failed_from_chain(setup, "baseline", expected)


def failed_from_chain(setup: Setup, parent: str, expected: Outcome) -> None:
    """`--failed-from parent`, then `--failed-from` that rerun, each with a fresh LLM cache: each
    ends as `expected` (results, counts, rates, error_groups, exit code): a model's answers behind
    the results a rerun took from its parent count whether the parent made them or took them in."""
    for number, (source, out) in enumerate(((parent, "rerun"), ("rerun", "rerun2")), 1):
        setup.answer()
        done = setup.cli("run", setup.rel, "--input", setup.case.input, "--failed-from", source, "--out", out,
                         "--cache-dir", str(setup.root / f"cache-rerun-{number}"), "-q")
        assert "Traceback" not in done.output, done.output
        got = folder_outcome(setup.root / out, done.exit_code)
        assert (got.summary or {})["rerun_items"] == expected.counts["errors"], done.output
        differences = Differences()
        differences.check("results", [{k: v for k, v in r.items() if k != "memo_hit"} for r in got.results],
                          [{k: v for k, v in r.items() if k != "memo_hit"} for r in expected.results])
        differences.check("counts", got.counts, expected.counts)
        for key in ("rates", "error_groups", "juries"):
            differences.check(key, (got.summary or {}).get(key), (expected.summary or {}).get(key))
        differences.check("exit code", got.exit, expected.exit)
        differences.check("error_groups' order", error_order(setup.root / out), error_order(setup.root / parent))
        differences.none(f"{out}: {done.output}")


def error_order(folder: Path) -> list[str]:
    """summary.json's error_groups in their order (a failing juror's name made M)."""
    groups = json.loads((folder / "summary.json").read_text()).get("error_groups") or []
    return [JUROR.sub("model M", group["error"]) for group in groups]


@pytest.mark.parametrize("case", cases("failed_from_memo", FAST))
def test_a_rerun_of_the_failed_items_of_a_memo_rerun_is_the_run(case: str, in_process: Callable[[str], Setup]) -> None:
    """The same from a rerun that took its judged results from the memo store: its results a
    model made (in the run before) count as answers in the reruns of its failed items."""
    setup = in_process(case)
    setup.pipeline.write_text(setup.pipeline.read_text().replace(
        "rates: {kept:", "rates: {judged: \"{{ result.verdict is defined }}\", kept:", 1))
    first, _ = memo_reruns(setup)
    failed_from_chain(setup, "memo", first)


def renamed(outcome: Outcome, old: str, new: str) -> Outcome:
    """The outcome with every mention of the input file `old` saying `new`."""
    text = json.dumps([outcome.results, outcome.counts, outcome.summary]).replace(json.dumps(old)[1:-1],
                                                                                 json.dumps(new)[1:-1])
    results, counts, summary = json.loads(text)
    if summary and "error_groups" in summary:           # (error, count) pairs, as summary_part makes them
        summary["error_groups"] = [tuple(group) for group in summary["error_groups"]]
    return Outcome(results, counts, summary, outcome.exit)


@pytest.mark.parametrize("case", cases("jobs_named", tuple(c.name for c in CASES if c.csv)))
def test_serve_job_of_the_file_under_a_name_no_kind_claims(case: str, serving: Callable[[str], tuple[Setup, Any]]) -> None:
    """`runner run --input tickets.txt` reads the file with the pipeline's own adapter (its csv
    options) whatever its name says: the same file uploaded as `tickets.txt` is read so too,
    and its run is the baseline's (a refused row naming the file as uploaded)."""
    setup, client = serving(case)
    expected = renamed(setup.baseline(), Path(setup.case.input).name, "tickets.txt")
    setup.answer()
    assert_job_is_the_run(setup, client, ("tickets.txt", (setup.root / setup.case.input).read_bytes()), expected)


# ---- calibration: eval --input and a one-setting sweep; probe ---------------------------------------

def write_labels(setup: Setup, expected: Outcome) -> str:
    """Labels that agree with the baseline (joined by item_key): eval and sweep score something."""
    count_by = (expected.summary or {}).get("count_by")
    rows = [{"item_key": r["item_key"], "truth": "ERROR" if r.get("error") else r.get(count_by)}
            for r in expected.results]
    (setup.root / "labels.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return "labels.jsonl"


LABELS = ("--key", "item_key", "--truth", "truth")


@pytest.mark.parametrize("case", cases("eval"))
def test_eval_runs_the_pipeline_as_runner_run_does(case: str, in_process: Callable[[str], Setup]) -> None:
    """`runner eval PIPELINE --input`: the run it makes is the baseline's, and so is its exit code."""
    setup = in_process(case)
    expected = setup.baseline()
    labels = write_labels(setup, expected)
    setup.answer()
    done = setup.cli("eval", setup.rel, "--input", setup.case.input, "--labels", labels, *LABELS, "--out", "eval",
                     "--cache-dir", str(setup.root / "cache-eval"))
    assert "Traceback" not in done.output, done.output
    assert_same(folder_outcome(setup.root / "eval", done.exit_code), expected, done.output)


def one_setting(pipeline: Path) -> str:
    """`--grid KEY=VALUE` of the pipeline's first plain param at its default: the plain run."""
    for name, value in load_pipeline(pipeline).params.items():
        if isinstance(value, (bool, int, float, str)):
            return f"params.{name}={json.dumps(value) if not isinstance(value, str) else value}"
    raise AssertionError(f"{pipeline}: no plain param to sweep")


@pytest.mark.parametrize("case", cases("sweep"))
def test_a_one_setting_sweep_is_the_plain_run(case: str, in_process: Callable[[str], Setup]) -> None:
    """`runner sweep --grid` of one setting (a param at its default), calls allowed: its items,
    errors and counts by verdict are the baseline's, and so is its exit code."""
    setup = in_process(case)
    expected = setup.baseline()
    labels = write_labels(setup, expected)
    setup.answer()
    done = setup.cli("sweep", setup.rel, "--input", setup.case.input, "--labels", labels, *LABELS,
                     "--grid", one_setting(setup.pipeline), "--allow-calls", "--out", "sweep",
                     "--cache-dir", str(setup.root / "cache-sweep"))
    assert "Traceback" not in done.output, done.output
    assert (setup.root / "sweep" / "sweep.json").is_file(), done.output
    [setting] = json.loads((setup.root / "sweep" / "sweep.json").read_text())["settings"]
    differences = Differences()
    differences.check("status", setting["status"], "ran")
    differences.check("counts", {"items": sum(setting["counts"].values()), "errors": setting["errors"],
                                 "by_verdict": dict(sorted(setting["counts"].items()))},
                      {k: expected.counts[k] for k in ("items", "errors", "by_verdict")})
    differences.check("exit code", done.exit_code, expected.exit)
    differences.none(done.output)


def originals(results: list[dict[str, Any]], expected: Outcome) -> list[dict[str, Any]]:
    """A probe run's originals, in order (each comes before its copies; a copy of a step's
    field has its original's item_key, so the first result of that key is the original),
    numbered as in the input."""
    found: list[dict[str, Any]] = []
    for result in results:
        if len(found) < len(expected.results) and result["item_key"] == expected.results[len(found)]["item_key"]:
            found.append({**result, "index": expected.results[len(found)]["index"]})
    return found


@pytest.mark.parametrize("case", cases("probe", tuple(c.name for c in CASES if c.probes)))
def test_probe_judges_the_originals_as_runner_run_does(case: str, in_process: Callable[[str], Setup]) -> None:
    """`runner probe`: the originals' results are the baseline's, and so is its exit code."""
    setup = in_process(case)
    expected = setup.baseline()
    setup.answer()
    done = setup.cli("probe", setup.rel, "--input", setup.case.input, "--out", "probe", "-q",
                     "--cache-dir", str(setup.root / "cache-probe"))
    assert "Traceback" not in done.output, done.output
    # what a probe run adds to each result, its jurors' votes and verdicts (docs/robustness.md), is the
    # probe's own record; the rest is the item's result as any run gives it
    results = [{k: v for k, v in r.items() if k != "probe_jurors"}
               for r in folder_outcome(setup.root / "probe", None).results]
    differences = Differences()
    differences.check("originals' results", originals(results, expected), expected.results)
    differences.check("exit code", done.exit_code, expected.exit)
    differences.none(done.output)


# ---- executors: worker processes, a provider's batch API, Ray (models over HTTP: the fake server) ---

RAY_REQUIRED = os.environ.get("RUNNER_REQUIRE_RAY") == "1"      # CI's Ray stage: run, never skip
EXECUTORS = {
    "processes": ["--executor", "processes", "--workers", "2"],
    "batch": ["--batch"],
    "ray": ["--executor", "ray", "--workers", "2"],
}


def executor_cases(executor: str) -> list[Any]:
    params = cases(executor, slow=True)
    if executor == "ray":
        marks = [pytest.mark.ray, pytest.mark.xdist_group("ray_cluster"),
                 pytest.mark.skipif(not (RAY_REQUIRED or importlib.util.find_spec("ray")),
                                    reason="the ray extra is not installed")]
        params = [pytest.param(*p.values, id=p.id, marks=[*p.marks, *marks]) for p in params]
    return params


def run_with(executor: str, over_http: Callable[[str], Setup], case: str) -> None:
    """The case over HTTP, run locally and with `executor`: the same folder's outcome and exit code."""
    setup = over_http(case)
    expected = setup.baseline()
    setup.answer()
    done = setup.cli("run", setup.rel, "--input", setup.case.input, "--out", executor, "--cache-dir",
                     str(setup.root / f"cache-{executor}"), *EXECUTORS[executor])
    assert "Traceback" not in done.output, done.output
    assert_same(folder_outcome(setup.root / executor, done.exit_code), expected, done.output)


@pytest.mark.parametrize("case", cases("subprocess", slow=True))
def test_runner_run_in_its_own_process(case: str, over_http: Callable[[str], Setup]) -> None:
    """`runner run` as the command runs, in a process of its own: the baseline, exit code included."""
    setup = over_http(case)
    expected = setup.baseline()
    setup.answer()
    done = subprocess.run([sys.executable, "-m", "runner.cli.app", "run", setup.rel, "--input", setup.case.input,
                           "--out", "own", "--cache-dir", "cache-own", "--quiet"], cwd=setup.root,
                          capture_output=True, text=True, timeout=600)
    assert "Traceback" not in done.stderr, done.stderr
    assert_same(folder_outcome(setup.root / "own", done.returncode), expected, done.stdout + done.stderr)


@pytest.mark.parametrize("case", executor_cases("processes"))
def test_worker_processes(case: str, over_http: Callable[[str], Setup]) -> None:
    run_with("processes", over_http, case)


@pytest.mark.parametrize("case", executor_cases("batch"))
def test_a_provider_batch_api(case: str, over_http: Callable[[str], Setup]) -> None:
    run_with("batch", over_http, case)


@pytest.mark.parametrize("case", executor_cases("ray"))
def test_ray(case: str, over_http: Callable[[str], Setup]) -> None:
    run_with("ray", over_http, case)
