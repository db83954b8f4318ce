"""Whether committing the LLM cache's answers many to a transaction still pays: the run's
writer (runner/llm/writer.py) against one transaction per answer.

5,214 answers of the citation judge's size (bench/throughput.py's 64-in-flight scenario)
written to a fresh JsonCache (diskcache) in a temporary folder, each way in turn, ROUNDS
times: one `set` per answer, and `set_many` of BATCH answers (about what FLUSH_EVERY
gathers at 64 calls in flight and 50 ms latency). Wall and CPU time of this process, best
and median.

    python bench/cache_commits.py [--tmp DIR]
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from runner.llm.cache.store import JsonCache  # noqa: E402

ANSWERS = 5214
BATCH = 64
ROUNDS = 5
ENTRY = {"content": json.dumps({"verdict": "VALID", "substantive_quote": True, "quote_in_context": True,
                                "supports_claim": True, "reason": "The source says so, in the quoted words." * 3}),
         "finish_reason": "stop", "usage": {"prompt_tokens": 812, "completion_tokens": 64, "total_tokens": 876},
         "cost": None, "model": "openai/local-model", "timestamp": "2026-11-27T00:00:00+00:00"}


def one_by_one(cache: JsonCache, keys: list[str]) -> None:
    for key in keys:
        cache.set(key, ENTRY)


def batched(cache: JsonCache, keys: list[str]) -> None:
    for start in range(0, len(keys), BATCH):
        cache.set_many([(key, ENTRY) for key in keys[start:start + BATCH]])


def timed(write, where: str | None) -> tuple[float, float]:
    keys = [hashlib.sha256(str(n).encode()).hexdigest() for n in range(ANSWERS)]
    with tempfile.TemporaryDirectory(dir=where) as folder:
        cache = JsonCache(Path(folder) / "responses")
        wall, cpu = time.perf_counter(), time.process_time()
        write(cache, keys)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        cache.close()
    return wall, cpu


def main() -> None:
    where = sys.argv[sys.argv.index("--tmp") + 1] if "--tmp" in sys.argv else None
    figures: dict[str, list[tuple[float, float]]] = {"one transaction per answer": [], f"{BATCH} a transaction": []}
    for _ in range(ROUNDS):
        figures["one transaction per answer"].append(timed(one_by_one, where))
        figures[f"{BATCH} a transaction"].append(timed(batched, where))
    print(f"{ANSWERS} answers, {ROUNDS} rounds in turn\n")
    print("| writes | wall, median (best) | CPU, median (best) | CPU per answer |\n|---|---|---|---|")
    for name, runs in figures.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(f"| {name} | {statistics.median(walls):.2f} s ({min(walls):.2f} s) | "
              f"{statistics.median(cpus):.2f} s ({min(cpus):.2f} s) | "
              f"{statistics.median(cpus) / ANSWERS * 1e6:.0f} us |")


if __name__ == "__main__":
    main()
