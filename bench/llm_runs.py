"""Cold vs fully cached run of the citation judge example, against the fake server.

Three jurors on 127.0.0.1 with scripted answers and 50 ms latency; each run is a fresh
`runner run` process, so the figures include start-up. The jurors are `openai/` models, so
neither run imports litellm; they share one local endpoint, which runner sends one request
at a time by default. Prints the table recorded in bench/RESULTS.md.

    python bench/llm_runs.py
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from installed_env import INSTALLED_ENV  # noqa: E402

from fakellm import FakeLLM, Reply  # noqa: E402

ANSWER = json.dumps({"verdict": "VALID", "substantive_quote": True, "quote_in_context": True,
                     "supports_claim": True, "reason": "scripted"})


def run_once(work: Path, cache: Path, out: str, url: str) -> float:
    args = [sys.executable, "-m", "runner.cli.app", "run", str(REPO / "pipelines" / "citation_judge.yaml"),
            "--input", "report.md", "--out", out, "--cache-dir", str(cache)]
    for seat, model in (("local", "local-model"), ("gemini", "gemini-fake"), ("openai", "gpt-fake")):
        args += ["--set", f"models.{seat}.model=openai/{model}", "--set", f"models.{seat}.api_base={url}",
                 "--set", f"models.{seat}.enabled=true"]
    started = time.perf_counter()
    done = subprocess.run(args, cwd=work, capture_output=True, text=True, env=INSTALLED_ENV)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return elapsed


def main() -> None:
    server = FakeLLM().start()
    server.script(Reply(ANSWER, delay=0.05))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "example"
        shutil.copytree(REPO / "examples" / "citation_judge", work)
        cache = Path(tmp) / "cache"
        cold = run_once(work, cache, "cold", server.url)
        sent_cold = len(server.requests)
        cached = run_once(work, cache, "cached", server.url)
        sent_cached = len(server.requests) - sent_cold
    server.stop()
    print("| run | wall time | requests sent |\n|---|---|---|")
    print(f"| cold (empty cache) | {cold:.2f} s | {sent_cold} |")
    print(f"| fully cached | {cached:.2f} s | {sent_cached} |")
    print(f"\ncold / cached: {cold / cached:.1f}x")


if __name__ == "__main__":
    main()
