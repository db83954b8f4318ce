"""`runner view` over a run of 1,000,000 items: how long the run's index takes to build once,
and how long a page takes after that (the run page, the next page, a deep page, a verdict
filter, a full-text search, an item), through a real `runner view` server.

    python bench/view.py                 # 1,000,000 items, the figures recorded in bench/RESULTS.md
    python bench/view.py --items 100000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from installed_env import INSTALLED_ENV  # noqa: E402

VERDICTS = ["VALID"] * 6 + ["QUOTE_NOT_FOUND", "MISLEADING", "INSUFFICIENT", "LLM_ERROR"]
WORDS = ("congress liberty ambition senate treaty amendment republic faction militia tariff "
         "commerce judiciary").split()


def write_run(folder: Path, items: int) -> None:
    """results.jsonl, summary.json and run.json shaped like the citation judge's (~1 KB a line)."""
    folder.mkdir(parents=True)
    pick = random.Random(7)
    counts: dict[str, int] = {}
    with (folder / "results.jsonl").open("w", encoding="utf-8") as out:
        for index in range(1, items + 1):
            verdict = pick.choice(VERDICTS)
            counts[verdict] = counts.get(verdict, 0) + 1
            claim = " ".join(pick.choice(WORDS) for _ in range(18)) + f" number {index}"
            votes = [{"model": m, "value": verdict, "answer": {"verdict": verdict, "reason": f"{m} finds it so"},
                      "error": None, "cached": False, "latency_ms": 40} for m in ("local", "gemini", "openai")]
            result = {"index": index, "item_key": f"{index:016x}", "step_1_existence": True,
                      "step_2_quote_match": verdict != "QUOTE_NOT_FOUND", "quote_score": 0.97,
                      "step_3_semantic": {"verdict": verdict, "reason": f"Consensus (3/3): {verdict}",
                                          "valid_votes": 3, "votes": votes},
                      "verdict": verdict, "verified": verdict == "VALID", "reason": f"Consensus (3/3): {verdict}",
                      "citation": {"index": index, "file": f"doc_{index % 50}.txt", "start": index % 400 + 1,
                                   "end": index % 400 + 2, "claim": claim, "quote": claim[:60]}}
            if verdict == "LLM_ERROR":
                result["error"] = "model 'local' at http://127.0.0.1:9/v1: connection refused"
            out.write(json.dumps(result) + "\n")
    summary = {"pipeline": "citation_judge", "total": items, "errors": counts.get("LLM_ERROR", 0),
               "count_by": "verdict", "counts": counts, "verification_rate": counts["VALID"] / items,
               "verification_rate_count": counts["VALID"], "planned": items, "partial": False}
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    (folder / "run.json").write_text(json.dumps({"format": 1, "started_at": "2026-11-24T08:00:00+00:00",
                                                 "ended_at": "2026-11-24T09:00:00+00:00",
                                                 "input": {"path": "report.md", "items": items}}), encoding="utf-8")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def timed(client: httpx.Client, url: str, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        response = client.get(url)
        times.append(time.perf_counter() - began)
        assert response.status_code == 200, (url, response.status_code, response.text[:300])
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="view-bench-"))
    try:
        reports = work / "reports"
        run = "citation_judge/report-000000/20261124-080000"
        began = time.perf_counter()
        write_run(reports / run, args.items)
        size = (reports / run / "results.jsonl").stat().st_size
        print(f"generated {args.items:,} results ({size / 2**20:.0f} MB) in {time.perf_counter() - began:.1f} s")
        port = free_port()
        server = subprocess.Popen([str(Path(sys.executable).parent / "runner"), "view", str(reports),
                                   "--port", str(port)], env=INSTALLED_ENV, stderr=subprocess.DEVNULL)
        try:
            base = f"http://127.0.0.1:{port}"
            with httpx.Client(timeout=600) as client:
                for _ in range(100):
                    try:
                        client.get(base + "/")
                        break
                    except httpx.TransportError:
                        time.sleep(0.1)
                began = time.perf_counter()
                timed(client, f"{base}/run/{run}", 1)           # the first open builds the index
                build = time.perf_counter() - began
                deep = args.items // 50 - 1
                pages = {"run page": f"/run/{run}", "next page": f"/run/{run}?page=2",
                         f"page {deep:,} (deep)": f"/run/{run}?page={deep}",
                         "verdict filter": f"/run/{run}?verdict=MISLEADING",
                         "verdict filter, page 100": f"/run/{run}?verdict=MISLEADING&page=100",
                         "full-text search": f"/run/{run}?q=ambition+treaty+number",
                         "an item": f"/run/{run}/item/{args.items // 2}",
                         "runs page": "/"}
                rows = [(name, timed(client, base + path, args.repeats)) for name, path in pages.items()]
        finally:
            server.terminate()
            server.wait()
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        index = next((reports / ".runner-view").rglob("*.sqlite"))
        print(f"\nindex built on first open: {build:.1f} s ({index.stat().st_size / 2**20:.0f} MB beside the runs)")
        print("\n| page | median | max |\n|---|---|---|")
        for name, times in rows:
            print(f"| {name} | {statistics.median(times) * 1000:.0f} ms | {max(times) * 1000:.0f} ms |")
        print(f"\npeak RSS of the server: {peak:.0f} MB")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
