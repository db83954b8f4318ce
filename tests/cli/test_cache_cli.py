"""runner cache stats / clear, and a corrupt cache."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from helpers import one_step_pipeline, write_json
from runner.llm.cache.store import JsonCache
from runner.testing import Reply


@pytest.fixture
def filled(project):
    cache = JsonCache(project.root / "cache" / "responses")
    now = datetime.now(UTC)
    for n, (model, age) in enumerate([("openai/gpt-4o-mini", 40), ("openai/gpt-4o-mini", 1), ("local-model", 2)]):
        stamp = (now - timedelta(days=age)).isoformat(timespec="seconds")
        cache.set(f"k{n}", {"content": "x" * 100, "model": model, "timestamp": stamp})
    cache.close()
    return now


def test_stats(filled, cli):
    shown = cli("cache", "stats", "--json")
    assert shown.exit_code == 0, shown.stderr
    stats = json.loads(shown.stdout)
    assert stats["entries"] == 3 and stats["size_bytes"] > 0
    assert {name: row["entries"] for name, row in stats["models"].items()} == {"openai/gpt-4o-mini": 2, "local-model": 1}
    oldest = datetime.fromisoformat(stats["models"]["openai/gpt-4o-mini"]["oldest"])
    assert (filled - oldest).days == 40
    text = cli("cache", "stats").stdout
    assert "3 answer(s)" in text and "local-model" in text


def test_clear_by_model_and_age(project, filled, cli):
    logs = project.root / "cache" / "call_logs"      # the log kept with each answer goes with it
    logs.mkdir()
    for n in range(3):
        (logs / f"k{n}.txt").write_text("=== PROMPT ===")
    assert cli("cache", "clear", "--model", "gpt-4o-mini", "--older-than", "30d").stdout == "removed 1 cached answer(s)\n"
    assert sorted(p.name for p in logs.iterdir()) == ["k1.txt", "k2.txt"]
    assert json.loads(cli("cache", "stats", "--json").stdout)["entries"] == 2
    assert cli("cache", "clear", "--model", "local-model").stdout == "removed 1 cached answer(s)\n"
    assert cli("cache", "clear").stdout == "removed 1 cached answer(s)\n"
    bad = cli("cache", "clear", "--older-than", "a month")
    assert bad.exit_code == 2 and bad.stderr.startswith("--older-than 'a month': give a number and a unit")


def test_no_cache_and_corrupt_cache(project, cli, scripted_llm):
    missing = cli("cache", "stats")
    assert missing.exit_code == 2 and "no LLM cache here" in missing.stderr
    folder = project.root / "cache" / "responses"
    folder.mkdir(parents=True)
    (folder / "cache.db").write_bytes(b"this is not a database" * 100)
    corrupt = cli("cache", "stats")
    assert corrupt.exit_code == 2
    assert corrupt.stderr.startswith(f"cache folder {folder} cannot be used (") and "remove it" in corrupt.stderr
    scripted_llm.script(Reply("yes"))
    project.prompt("p.j2", "Say {{ item.n }}\n")
    path = one_step_pipeline(project, "{id: ask, uses: llm, with: {model: m, prompt: p.j2}}")
    run = cli("run", str(path), "--input", str(write_json(project.root / "in.json", [{"n": 1}])), "--out", "out",
              "--quiet")
    assert run.exit_code == 2 and run.stderr.startswith(f"cache folder {folder} cannot be used (")   # said once
