"""The executor choice: a local run never imports ray (only --executor ray pays for it); a
worker whose cache another process owns stores each answer there before its item ends."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Any

import pytest
from test_llm import server_pipeline

from helpers import write_json
from runner.engine.context import RunRole, Runtime
from runner.engine.execute import run_items
from runner.inputs import Item
from runner.pipeline.loader import load_pipeline
from runner.runs.request import RunOptions

pytestmark = pytest.mark.slow


def test_a_local_run_sent_or_cached_never_imports_ray(project, fake_llm):
    fake_llm.answer_json({"verdict": "yes"})
    path = server_pipeline(project)
    write_json(project.root / "in.json", [{"q": "1"}, {"q": "2"}])
    block = "import sys; sys.modules['ray'] = None; from runner.cli.app import main; main()"
    env = dict(os.environ, FAKE_URL=fake_llm.url, RUNNER_CACHE_DIR=str(project.root / "cache"))
    for out in ("sent", "cached"):
        done = subprocess.run([sys.executable, "-c", block, "run", str(path), "--input", "in.json", "--out", out],
                              cwd=project.root, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    assert len(fake_llm.requests) == 2                    # the second run came from the cache
    assert "verdict" in (project.root / "cached" / "results.jsonl").read_text()


class OwnedElsewhere:
    """A cache another process owns, as a Ray worker on another machine sees the driver's:
    each read and write a round trip."""

    def __init__(self) -> None:
        self.entries: dict[str, Any] = {}

    async def aget(self, key: str) -> Any:
        await asyncio.sleep(0.005)
        return self.entries.get(key)

    async def aset(self, key: str, value: Any) -> None:
        await asyncio.sleep(0.02)
        self.entries[key] = value

    def close(self) -> None:
        return None


def test_a_worker_stores_each_answer_with_the_caches_owner_before_its_item_ends(project, fake_llm, monkeypatch):
    """A block retried after its worker's machine was lost then asks only what was in flight."""
    monkeypatch.setenv("FAKE_URL", fake_llm.url)
    fake_llm.answer_json({"verdict": "yes"})
    pipeline = load_pipeline(server_pipeline(project))
    owner = OwnedElsewhere()
    stored_at_each_end: list[int] = []

    async def block(values: list[str]) -> list[dict[str, Any]]:
        runtime = Runtime.create(pipeline, RunOptions(cache_dir=project.root / "cache"), RunRole(worker=True))
        runtime.open_caches = {"responses": owner}
        results: list[dict[str, Any]] = []

        def keep(position: int, result: dict[str, Any]) -> None:
            stored_at_each_end.append(len(owner.entries))
            results.append(result)
        try:
            await run_items(runtime, [Item(n, {"q": q}) for n, q in enumerate(values, start=1)], 1, keep)
        finally:
            await runtime.aclose()
        return results

    first = asyncio.run(block(["1", "2", "3"]))
    assert [r["verdict"] for r in first] == ["yes"] * 3 and stored_at_each_end == [1, 2, 3]
    again = asyncio.run(block(["1", "2", "3", "4"]))       # the block again, on another worker
    assert [r["cached"] for r in again] == [True, True, True, False]
    assert len(fake_llm.requests) == 4
