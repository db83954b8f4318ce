"""The executor choice: a local run never imports ray (only --executor ray pays for it)."""

from __future__ import annotations

import os
import subprocess
import sys

from test_llm import llm_pipeline

from helpers import write_json


def test_a_local_run_sent_or_cached_never_imports_ray(project, fake_llm):
    fake_llm.answer_json({"verdict": "yes"})
    path = llm_pipeline(project)
    write_json(project.root / "in.json", [{"q": "1"}, {"q": "2"}])
    block = "import sys; sys.modules['ray'] = None; from runner.cli.app import main; main()"
    env = dict(os.environ, FAKE_URL=fake_llm.url, RUNNER_CACHE_DIR=str(project.root / "cache"))
    for out in ("sent", "cached"):
        done = subprocess.run([sys.executable, "-c", block, "run", str(path), "--input", "in.json", "--out", out],
                              cwd=project.root, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    assert len(fake_llm.requests) == 2                    # the second run came from the cache
    assert "verdict" in (project.root / "cached" / "results.jsonl").read_text()
