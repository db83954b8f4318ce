"""A batch run against the live run it replaces: the citation judge over 200 citations,
three priced jurors (gpt-4o-mini, gpt-4.1-mini, gpt-4o, named as `openai/` models so the
fake server on 127.0.0.1 answers them), each run a fresh `runner run` process with its own
cache (16 live requests in flight per juror). Counts the requests each run sent (live chat
requests; batch files, batches, lines, polls) and the cost each run's summary.json reports
(litellm's price table: the batch price for the batch run). Prints the table recorded in
bench/RESULTS.md.

    python bench/batch.py
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

JURORS = {"local": "gpt-4o-mini", "gemini": "gpt-4.1-mini", "openai": "gpt-4o"}
VERDICTS = ("VALID", "MISLEADING", "UNSUPPORTED", "INSUFFICIENT")
CITATIONS = 200


def load(folder: Path) -> None:
    lines = [f'Claim number {n} says "Congress shall make no law respecting an establishment of religion" '
             f'[us_constitution.txt:L100-L101](data/canonical/us_constitution.txt).' for n in range(CITATIONS)]
    (folder / "load.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def script(server: FakeLLM) -> None:
    for n in range(CITATIONS):
        for offset, model in enumerate(JURORS.values()):
            verdict = VERDICTS[(n + offset * (n % 3)) % 4]
            server.script(Reply(json.dumps({"verdict": verdict, "substantive_quote": True, "quote_in_context": True,
                                            "supports_claim": verdict == "VALID", "reason": "scripted"})),
                          model=model, contains=f"Claim number {n} says")


def run(work: Path, cache: Path, out: str, url: str, *extra: str) -> tuple[float, dict]:
    args = [sys.executable, "-m", "runner.cli.app", "run", str(REPO / "pipelines" / "citation_judge.yaml"),
            "--input", "load.md", "--out", out, "--cache-dir", str(cache), "--quiet", *extra]
    for seat, model in JURORS.items():
        for key, value in (("model", f"openai/{model}"), ("api_base", url), ("enabled", "true"),
                           ("batch_poll_seconds", "0.05"), ("limits.requests_per_day", "100000"),
                           ("limits.concurrency", "16")):
            args += ["--set", f"models.{seat}.{key}={value}"]
    started = time.perf_counter()
    done = subprocess.run(args, cwd=work, capture_output=True, text=True, env=INSTALLED_ENV)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return elapsed, json.loads((work / out / "summary.json").read_text())


def verdicts(work: Path, out: str) -> list[str]:
    return [json.loads(line)["verdict"] for line in (work / out / "results.jsonl").read_text().splitlines()]


def main() -> None:
    server = FakeLLM().start()
    script(server)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "example"
        shutil.copytree(REPO / "examples" / "citation_judge", work)
        load(work)
        live_time, live = run(work, Path(tmp) / "live-cache", "live", server.url)
        live_chat = len(server.requests)
        batch_time, batched = run(work, Path(tmp) / "batch-cache", "batch", server.url, "--batch")
        batch_chat = len(server.requests) - live_chat
        created = server.batches.created()
        same = verdicts(work, "live") == verdicts(work, "batch")
        rerun_time, rerun = run(work, Path(tmp) / "batch-cache", "rerun", server.url, "--batch")
        rerun_batches = len(server.batches.created()) - len(created)
    server.stop()
    live_cost = sum(m["cost"] for m in live["models"].values())
    batch_cost = sum(m["cost"] for m in batched["models"].values())
    lines = sum(len(b.lines) for b in created)
    print("| run | chat requests (live) | batches | batch lines | files uploaded | polls | cost (summary.json) "
          "| wall time |\n|---|---|---|---|---|---|---|---|")
    print(f"| live | {live_chat} | 0 | 0 | 0 | 0 | ${live_cost:.4f} | {live_time:.2f} s |")
    print(f"| --batch | {batch_chat} | {len(created)} | {lines} | {len(server.batches.uploads)} | "
          f"{sum(b.polls for b in created)} | ${batch_cost:.4f} | {batch_time:.2f} s |")
    rerun_sent = sum(m["calls"] for m in rerun["models"].values())
    rerun_cost = sum(m["cost"] for m in rerun["models"].values())
    print(f"| --batch, cached rerun | {rerun_sent} sent | {rerun_batches} | 0 | 0 | 0 "
          f"| ${rerun_cost:.4f} | {rerun_time:.2f} s |")
    print(f"\nbatch / live cost: {batch_cost / live_cost:.3f}; verdicts identical: {same}; "
          f"batches per model: {sorted((b.model, len(b.lines)) for b in created)}")
    for name, section in batched.get("batches", {}).items():
        print(f"  {name}: {section}")


if __name__ == "__main__":
    main()
