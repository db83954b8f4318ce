"""The memo store as an SQLite database: nothing lost to SIGKILL or to a second run on the
same store, an old JSON store imported once, and --no-cache bypassing it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fakellm import Reply
from helpers import run, write_json
from runner.stores.memo import MemoStore

pytestmark = pytest.mark.slow

PIPELINE = """
    version: 1
    name: memo
    params: {{store: memo.json}}
    models:
      m: {{model: openai/fake, api_base: "{url}", retries: 0}}
    memo: {{key: "{{{{ item.k }}}}", store: "{{{{ params.store }}}}"}}
    steps:
      - {{id: ask, uses: llm, with: {{model: m, prompt: ask.j2}}}}
    output: {{answer: "{{{{ steps.ask.raw }}}}", k: "{{{{ item.k }}}}"}}
    """


def _project(project, fake_llm) -> Path:
    project.prompt("ask.j2", "Check {{ item.k }}.")
    return project.pipeline(PIPELINE.format(url=fake_llm.url))


def _start(pipeline: Path, source: Path, out: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "runner.cli.app", "run", str(pipeline), "--input", str(source),
                             "--out", str(out), "--quiet", "--cache-dir", str(out.parent / "cache"), *extra],
                            cwd=pipeline.parent.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _lines(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.endswith("}")]


def test_a_run_killed_halfway_keeps_every_finished_item(project, fake_llm):
    fake_llm.script(Reply("fine", delay=0.05))
    pipeline = _project(project, fake_llm)
    source = write_json(project.root / "in.json", [{"k": f"key{n}"} for n in range(200)])
    out = project.root / "out"
    child = _start(pipeline, source, out)
    deadline = time.monotonic() + 60
    while len(_lines(out / "results.jsonl")) < 10 and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL                       # killed mid-run, not finished
    finished = {r["k"] for r in _lines(out / "results.jsonl")}
    assert 10 <= len(finished) < 200
    stored = dict(MemoStore(out / "memo.json").items())
    assert finished <= set(stored)                                   # every finished item is stored
    assert all(stored[k] == {"answer": "fine", "k": k} for k in finished)


def test_two_runs_on_one_store_lose_no_entry(project, fake_llm):
    fake_llm.script(Reply("fine", delay=0.01))
    pipeline = _project(project, fake_llm)
    store = project.root / "shared" / "memo.json"
    runs = []
    for name in ("a", "b"):
        source = write_json(project.root / f"{name}.json", [{"k": f"{name}{n}"} for n in range(40)])
        runs.append(_start(pipeline, source, project.root / name, "--set", f"params.store={store}"))
    for child in runs:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
    keys = {key for key, _ in MemoStore(store).items()}
    assert keys == {f"{name}{n}" for name in "ab" for n in range(40)}


def test_a_json_store_is_imported_once_and_left_as_it_was(project, fake_llm):
    fake_llm.script("fresh")
    pipeline = _project(project, fake_llm)
    legacy = write_json(project.root / "out" / "memo.json", {"old": {"answer": "remembered", "k": "old"}})
    before = legacy.read_text()
    source = write_json(project.root / "in.json", [{"k": "old"}, {"k": "new"}])
    from runner.stores.memo import MemoStore
    first = run(pipeline, source)
    # An earlier version's entry does not say what made it (pipeline, params, prompts, models:
    # issue 61): it is imported (`runner feedback` finds its trace ids) but judged again once.
    assert [(r["answer"], r.get("memo_hit", False)) for r in first.results] == [("fresh", False), ("fresh", False)]
    assert first.summary["memo"] == {"store": "out/memo.sqlite", "reused": 0, "stored": 2}
    assert legacy.read_text() == before
    # Entries added to the JSON later are not imported again: the database is the store now.
    write_json(legacy, {"old": {"answer": "edited", "k": "old"}, "other": {"answer": "x", "k": "other"}})
    again = run(pipeline, write_json(project.root / "in.json", [{"k": "old"}, {"k": "other"}]))
    assert [(r["answer"], r.get("memo_hit", False)) for r in again.results] == [("fresh", True), ("fresh", False)]
    assert "edited" not in {result.get("answer") for _, result in MemoStore(project.root / "out" / "memo.json").items()}


def test_no_cache_reads_no_stored_result_but_stores_what_it_computes(project, fake_llm):
    fake_llm.script("first")
    pipeline = _project(project, fake_llm)
    source = write_json(project.root / "in.json", [{"k": "a"}, {"k": "b"}])
    run(pipeline, source)
    fake_llm.reset()
    fake_llm.script("second")
    fresh = run(pipeline, source, no_cache=True)
    assert [r["answer"] for r in fresh.results] == ["second", "second"] and len(fake_llm.requests) == 2
    assert not any(r.get("memo_hit") for r in fresh.results)
    assert fresh.summary["memo"]["reused"] == 0 and fresh.summary["memo"]["stored"] == 2
    assert [r["answer"] for r in run(pipeline, source).results] == ["second", "second"]     # stored anew


def test_a_store_that_is_not_a_database_is_a_clear_error(project, fake_llm, cli):
    pipeline = _project(project, fake_llm)
    (project.root / "out").mkdir()
    (project.root / "out" / "memo.sqlite").write_text("not a database " * 100)
    done = cli("run", str(pipeline), "--input", str(write_json(project.root / "in.json", [{"k": "a"}])),
               "--out", "out")
    assert done.exit_code == 2 and "memo.sqlite: not a usable memo store" in done.stderr
    assert os.path.exists(project.root / "out" / "memo.sqlite")


def test_an_unreadable_memo_row_is_a_miss_said_once(project, cli):
    """Issue 50, M1: one stored result that is not JSON: that item is computed again (and
    stored over it), said once; every other item reuses its stored result."""
    import sqlite3
    path = project.pipeline("""
        version: 1
        name: m1
        memo: {key: "{{ item.k }}", store: memo.json}
        steps: [{id: c, uses: compute, with: {v: "{{ item.k ~ '!' }}"}}]
        output: {v: "{{ steps.c.v }}"}
        """)
    source = write_json(project.root / "in.json", [{"k": f"key{n}"} for n in range(20)])
    assert cli("run", str(path), "--input", str(source), "--out", "out").exit_code == 0
    store = project.root / "out" / "memo.sqlite"
    with sqlite3.connect(store) as db:
        db.execute("UPDATE memo SET result = '{not json' WHERE key IN ('key3', 'key7')")
    for rerun in (1, 2):                   # the rerun, and the one after it
        again = cli("run", str(path), "--input", str(source), "--out", "out")
        assert again.exit_code == 0, again.output
        results = project.results("out")
        assert [r["v"] for r in results] == [f"key{n}!" for n in range(20)]
        assert [n for n, r in enumerate(results) if not r.get("memo_hit")] == ([3, 7] if rerun == 1 else [])
        said = [w for w in project.summary("out").get("run_warnings", []) if "not readable" in w]
        assert again.stderr.count("not readable") == len(said) == (1 if rerun == 1 else 0), again.stderr
        if rerun == 1:
            assert str(store.relative_to(project.root)) in said[0] and "computed again" in said[0]
    assert project.summary("out")["memo"]["reused"] == 20
