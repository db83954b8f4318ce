"""Shipped pipelines with --batch give exactly the live run's results (issue 28): the
citation judge example, a 200-citation load, and deep judgment (whose stages become
successive batches); a --batch run killed with SIGKILL while its batches are pending
polls the same batches when started again."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fakellm import Reply
from helpers import copy_example, run, write_json
from test_citation_judge import EXAMPLE, PIPELINE, SEATS, answer, jury_overrides, script

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DEEP = REPO / "pipelines" / "deep_judgment.yaml"
VOLATILE = {"latency_ms", "cached", "duration_ms"}
FAST_POLL = [f"models.{seat}.batch_poll_seconds=0.02" for seat in SEATS]


def stable(value):
    """A result without what differs between two equal runs (timings, cache flags)."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def judge_example(cli, folder: Path, cache: Path, url: str, *extra: str) -> list[dict]:
    args = ["run", str(PIPELINE), "--input", "report.md", "--out", "out", "--cache-dir", str(cache),
            *jury_overrides(url), *extra]
    result = cli(*args)
    assert result.exit_code == 0, result.output
    if "--batch" in extra:
        assert "LLM calls: 21 sent, 0 cached, 5 failed (21 in 3 provider batch(es)); written to out" in result.output
    return [json.loads(line) for line in (folder / "out" / "results.jsonl").read_text().splitlines()]


@pytest.fixture
def example(tmp_path, monkeypatch):
    copy_example(EXAMPLE, tmp_path / "example")
    monkeypatch.chdir(tmp_path / "example")
    return tmp_path / "example"


def test_citation_example_with_batch_gives_the_live_verdicts_one_batch_per_juror(example, fake_llm, cli, tmp_path):
    script(fake_llm)
    live = judge_example(cli, example, tmp_path / "live-cache", fake_llm.url)
    assert len(fake_llm.requests) == 21 and fake_llm.batches.created() == []   # no jury for a quote not found
    fake_llm.requests.clear()
    poll = [arg for setting in FAST_POLL for arg in ("--set", setting)]
    batched = judge_example(cli, example, tmp_path / "batch-cache", fake_llm.url, "--batch", *poll)
    assert fake_llm.requests == []                                  # no live chat request at all
    assert sorted(b.model for b in fake_llm.batches.created()) == sorted(SEATS.values())
    assert all(len(b.lines) == 7 for b in fake_llm.batches.created())
    assert [r["verdict"] for r in batched] == [r["verdict"] for r in live]
    assert stable(batched) == stable(live)


def test_retries_of_a_round_go_out_together_one_batch_per_model(example, fake_llm, cli, tmp_path):
    """Issue 50, B5: five calls of the example fail with HTTP 500 every time; with three retries,
    each round of retries goes out as one batch per model, never a batch per failed line. The
    openai seat's batches take longer (as a real provider's do, each at its own pace), so the
    other seats' retries come back while it is still pending."""
    script(fake_llm)
    retries = [arg for seat in SEATS for setting in (f"models.{seat}.retries=3", f"models.{seat}.backoff=0.3")
               for arg in ("--set", setting)]
    poll = [arg for setting in [*FAST_POLL, "models.openai.batch_poll_seconds=0.5"] for arg in ("--set", setting)]
    result = cli("run", str(PIPELINE), "--input", "report.md", "--out", "out", "--cache-dir", str(tmp_path / "c"),
                 *jury_overrides(fake_llm.url), *retries, *poll, "--batch")
    assert result.exit_code == 0, result.output
    batches = fake_llm.batches.created()
    sizes = {model: [len(b.lines) for b in batches if b.model == model] for model in SEATS.values()}
    assert sizes == {"local-model": [7, 2, 2, 2], "gemini-fake": [7, 2, 2, 2], "gpt-fake": [7, 1, 1, 1]}
    assert "LLM calls: 36 sent, 0 cached, 5 failed (36 in 12 provider batch(es))" in result.stdout


def two_hundred_citations(folder: Path) -> Path:
    """200 citations of the example's sources, numbered so each juror's answer is scripted."""
    lines = [f'Claim number {n} says "Congress shall make no law respecting an establishment of religion" '
             f'[us_constitution.txt:L100-L101](data/canonical/us_constitution.txt).' for n in range(200)]
    return folder.joinpath("load.md").write_text("\n".join(lines) + "\n", encoding="utf-8") and folder / "load.md"


def script_load(fake_llm) -> None:
    verdicts = ("VALID", "MISLEADING", "UNSUPPORTED", "INSUFFICIENT")
    for n in range(200):
        for offset, (seat, model) in enumerate(SEATS.items()):
            choice = (n + offset * (n % 3)) % 5
            reply = Reply(status=500) if choice == 4 else Reply(answer(verdicts[choice], seat))
            fake_llm.script(reply, model=model, contains=f"Claim number {n} says")


def test_two_hundred_citations_with_batch_match_the_live_run(example, fake_llm, cli, tmp_path):
    two_hundred_citations(example)
    script_load(fake_llm)
    base = ["run", str(PIPELINE), "--input", "load.md", "--out", "out", *jury_overrides(fake_llm.url),
            "--set", "models.gemini.limits.requests_per_day=1000"]      # the example's free tier allows 20
    assert cli(*base, "--cache-dir", str(tmp_path / "live")).exit_code == 0
    live = [json.loads(line) for line in (example / "out" / "results.jsonl").read_text().splitlines()]
    assert len(fake_llm.requests) == 600
    fake_llm.requests.clear()
    poll = [arg for setting in FAST_POLL for arg in ("--set", setting)]
    result = cli(*base, "--cache-dir", str(tmp_path / "batch"), "--batch", *poll)
    assert result.exit_code == 0, result.output
    batched = [json.loads(line) for line in (example / "out" / "results.jsonl").read_text().splitlines()]
    assert fake_llm.requests == []
    assert sorted((b.model, len(b.lines)) for b in fake_llm.batches.created()) == \
        sorted((model, 200) for model in SEATS.values())
    assert len({r["verdict"] for r in live}) >= 3                   # the load has several outcomes
    assert [r["verdict"] for r in batched] == [r["verdict"] for r in live]
    assert stable(batched) == stable(live)


# -- deep judgment ------------------------------------------------------------------------
RESPONSE = ("In the ATLAS-2 trial, patients received ZX-41 at 40 mg once daily for 12 weeks. "
            "The primary endpoint was met: systolic blood pressure fell by 11.2 mmHg compared with placebo.")
TEMPLATE = {"attributes": {"dose_mg": {"type": "number", "description": "Daily dose"},
                           "endpoint_met": {"type": "boolean", "description": "Primary endpoint met"}}}
EXTRACT, RETRY, REASON = "You extract evidence", "could not be found in the response", "explain in one or two"
PARSE, ABSTAIN = "Fill the attributes below", "decline to answer"
GOOD = {"dose_mg": [{"text": "ZX-41 at 40 mg once daily", "confidence": "high"}],
        "endpoint_met": [{"text": "The primary endpoint was met", "confidence": "high"}]}
PARAPHRASE = {**GOOD, "endpoint_met": [{"text": "the main study goal was reached", "confidence": "medium"}]}


def _prompt(body: dict) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []))


def script_deep(fake_llm) -> None:
    """Case A answers well; B paraphrases, then fixes it when re-asked; C never does."""
    def case(marker: str, stage: str):
        return lambda body: marker in _prompt(body) and stage in _prompt(body)
    fake_llm.script(json.dumps({"excerpts": GOOD}), when=case("case A", EXTRACT))
    fake_llm.script(json.dumps({"excerpts": {"endpoint_met": GOOD["endpoint_met"]}}), when=case("case B", RETRY))
    fake_llm.script(json.dumps({"excerpts": PARAPHRASE}), when=case("case B", EXTRACT))
    fake_llm.script(json.dumps({"excerpts": {"endpoint_met": [{"text": "a triumph", "confidence": "low"}]}}),
                    when=case("case C", RETRY))
    fake_llm.script(json.dumps({"excerpts": PARAPHRASE}), when=case("case C", EXTRACT))
    fake_llm.script(json.dumps({"reasoning": {"dose_mg": "40 mg", "endpoint_met": "met"}}), contains=REASON)
    fake_llm.script(json.dumps({"dose_mg": 40, "endpoint_met": True}), contains=PARSE)
    fake_llm.script(json.dumps({"abstained": False, "reason": "answered"}), contains=ABSTAIN)


def test_deep_judgment_with_batch_gives_the_live_results_stage_by_stage(project, fake_llm):
    records = [{"question": f"What did ATLAS-2 find? (case {c})", "response": f"{RESPONSE} (case {c})",
                "template": TEMPLATE, "expected": {"dose_mg": 40, "endpoint_met": True}} for c in "ABC"]
    source = write_json(project.root / "in.json", records)
    script_deep(fake_llm)
    overrides = [f"models.parser.api_base={fake_llm.url}", "models.parser.retries=0"]
    live = run(DEEP, source, out=project.root / "live", cache_dir=project.root / "live-cache", overrides=overrides)
    live_calls = len(fake_llm.requests)
    fake_llm.requests.clear()
    batched = run(DEEP, source, out=project.root / "batch", cache_dir=project.root / "batch-cache", batch=True,
                  overrides=[*overrides, "models.parser.batch_poll_seconds=0.02"])
    assert fake_llm.requests == []
    assert stable(batched.results) == stable(live.results)
    dj = {r["index"]: r["deep_judgment"] for r in batched.results}
    assert [dj[i]["deep_judgment_excerpt_retry_count"] for i in (1, 2, 3)] == [0, 1, 2]
    batches = fake_llm.batches.created()
    assert sum(len(b.lines) for b in batches) == live_calls
    assert len(batches) >= 4            # excerpts, the re-asks, reasoning, parse ...: one batch per stage
    first = [_prompt(line["body"]) for line in batches[0].lines]
    assert len(first) == 3 and all(EXTRACT in p for p in first)   # every item's first stage in one batch


# -- killed while batches are pending -----------------------------------------------------
@pytest.mark.parametrize(("stop", "lost"), [(signal.SIGKILL, "nothing"), (signal.SIGKILL, "the batch id"),
                                            (signal.SIGKILL, "the batch"), (signal.SIGTERM, "nothing")])
def test_a_batch_run_killed_while_pending_polls_the_same_batches_when_restarted(example, fake_llm, tmp_path, stop,
                                                                                lost):
    """Killed with its three batches pending. `the batch id`: as if killed between creating a
    batch and writing its id (found again by its submission id); `the batch`: as if killed
    before the batch was created (its calls are gathered again)."""
    script(fake_llm)
    cache = tmp_path / "cache"
    args, env = batch_command(cache, fake_llm.url)
    returncode = stopped_while_pending(args, env, example, fake_llm, cache, stop)
    store = cache / "batches.sqlite3"
    if stop == signal.SIGKILL:
        assert not (example / "out" / "summary.json").exists()      # it really died mid-run
    else:                                                            # stopped cleanly: what finished is written
        assert returncode == 143
        assert json.loads((example / "out" / "summary.json").read_text())["interrupted"] is True
    expected_batches = 3
    if lost != "nothing":
        with sqlite3.connect(store) as db:
            (batch_id,) = db.execute("SELECT batch_id FROM batches ORDER BY created LIMIT 1").fetchone()
            db.execute("UPDATE batches SET batch_id = NULL, status = 'submitting' WHERE batch_id = ?", (batch_id,))
        if lost == "the batch":
            del fake_llm.batches.batches[batch_id]
            expected_batches = 3 - 1 + 1                              # its calls go out once more, in a new one
    fake_llm.batches.hold = False
    again = subprocess.run(args, cwd=example, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert len(fake_llm.batches.created()) == expected_batches       # nothing submitted twice
    assert again.stderr.count("submitted by another run") == (2 if lost == "the batch" else 3)
    # The headline counts the answers the earlier run's batches gave (issue 50, B5).
    headline = ("(7 in 1 provider batch(es); 14 collected from 2 provider batch(es) another run submitted)"
                if lost == "the batch" else "(21 collected from 3 provider batch(es) another run submitted)")
    assert headline in again.stdout, again.stdout
    assert fake_llm.requests == []
    results = [json.loads(line) for line in (example / "out" / "results.jsonl").read_text().splitlines()]
    assert [r["verdict"] for r in results] == ["VALID", "VALID", "VALID", "HUNG_JURY", "MISLEADING", "LLM_ERROR",
                                               "INSUFFICIENT", "QUOTE_NOT_FOUND", "QUOTE_NOT_FOUND",
                                               "QUOTE_NOT_FOUND", "LINES_NOT_FOUND", "FILE_NOT_FOUND",
                                               "PATH_OUTSIDE_ROOT"]


def batch_command(cache: Path, url: str) -> tuple[list[str], dict[str, str]]:
    """`runner run --batch` of the citation example (a process of its own) and its environment."""
    args = [sys.executable, "-m", "runner.cli.app", "run", str(PIPELINE), "--input", "report.md", "--out", "out",
            "--cache-dir", str(cache), "--batch", *jury_overrides(url), "--quiet"]
    for setting in FAST_POLL:
        args += ["--set", setting]
    return args, {k: v for k, v in os.environ.items() if not k.startswith("RUNNER_")}


def stopped_while_pending(args: list[str], env: dict[str, str], example: Path, fake_llm, cache: Path,
                          stop: signal.Signals = signal.SIGKILL) -> int:
    """Start the run, wait until its three batches are on disk and polled, then stop it with
    `stop`; its exit code."""
    fake_llm.batches.hold = True             # the batches stay in progress until released
    first = subprocess.Popen(args, cwd=example, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    store = cache / "batches.sqlite3"
    try:
        deadline = time.monotonic() + 60

        def polled() -> bool:       # every batch on disk and polled at least once: the run waits on them
            created = fake_llm.batches.created()
            return _all_recorded(store, 3) and len(created) == 3 and all(b.polls for b in created)
        while time.monotonic() < deadline and not polled():
            time.sleep(0.05)
        assert polled(), first.stderr.read1().decode() if first.poll() else ""
    finally:
        first.send_signal(stop)
        first.wait(timeout=60)
        first.stdout.close()
        first.stderr.close()
    return first.returncode


def batches_command(cache: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runner.cli.app", "batches", "--cache-dir", str(cache), *extra],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("then", ["run", "cancel"])
def test_batches_the_provider_forgot_are_forgotten_and_their_calls_sent_again(example, fake_llm, tmp_path, then):
    """Issue 50, B1: a --batch run killed while its batches are pending; the provider then
    answers 404 for them (deleted, another organisation's key, a gateway restarted). Either the
    next run or `runner batches --cancel` finds each gone: it is forgotten, said once, and its
    calls go out again in new batches."""
    script(fake_llm)
    cache = tmp_path / "cache"
    args, env = batch_command(cache, fake_llm.url)
    stopped_while_pending(args, env, example, fake_llm, cache)
    gone = fake_llm.batches.forget()
    fake_llm.batches.hold = False
    assert len(gone) == 3 and all(f"{batch}: model" in batches_command(cache).stdout for batch in gone)
    if then == "cancel":
        cancelled = batches_command(cache, "--cancel")
        assert cancelled.returncode == 0, cancelled.stderr
        for batch in gone:
            assert f"{batch}: gone at the provider (HTTP 404): forgotten" in cancelled.stdout
    again = subprocess.run(args, cwd=example, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    if then == "run":
        for batch in gone:
            assert again.stderr.count(f"batch {batch}") == 1 and f"batch {batch} of model" in again.stderr
        assert again.stderr.count("is gone at the provider (HTTP 404): forgotten; its") == 3
    assert "gone" not in batches_command(cache).stdout and "no pending batches" in batches_command(cache).stdout
    created = fake_llm.batches.created()
    assert len(created) == 3 and sum(len(b.lines) for b in created) == 21        # every call sent again, once
    results = [json.loads(line) for line in (example / "out" / "results.jsonl").read_text().splitlines()]
    assert [r["verdict"] for r in results][:7] == ["VALID", "VALID", "VALID", "HUNG_JURY", "MISLEADING", "LLM_ERROR",
                                                   "INSUFFICIENT"]
    assert all("404" not in (r.get("error") or "") for r in results)


def _all_recorded(store: Path, count: int) -> bool:
    if not store.exists():
        return False
    try:
        with sqlite3.connect(store) as db:
            rows = db.execute("SELECT batch_id FROM batches").fetchall()
    except sqlite3.Error:
        return False
    return len(rows) == count and all(r[0] for r in rows)


@pytest.mark.xdist_group("litellm")      # litellm imported by one worker only
def test_seats_that_are_not_enabled_are_not_mentioned_by_batch(example, fake_llm, cli, tmp_path):
    fake_llm.script(answer("VALID", "local"), model="local-model")
    result = cli("run", str(PIPELINE), "--input", "report.md", "--out", "out", "--cache-dir", str(tmp_path / "c"),
                 "--set", f"models.local.api_base={fake_llm.url}", "--set", "models.local.batch_poll_seconds=0.02",
                 "--batch")
    assert result.exit_code == 0, result.output
    assert "has no batch API" not in result.stderr              # gemini (litellm) takes no seat here
    assert "(7 in 1 provider batch(es))" in result.stdout
    result = cli("run", str(PIPELINE), "--input", "report.md", "--out", "out2", "--cache-dir", str(tmp_path / "c2"),
                 "--set", f"models.local.api_base={fake_llm.url}", "--set", "models.local.batch_poll_seconds=0.02",
                 "--set", "models.gemini.enabled=true", "--set", "models.gemini.api_key=fake-google-key-123",
                 "--set", f"models.gemini.api_base={fake_llm.url}", "--set", "models.gemini.retries=0", "--batch")
    assert result.stderr.count("has no batch API runner can use") == 1        # said once
    assert "every call to gemini at" in result.stderr       # (all failed: the fake is no Gemini)
