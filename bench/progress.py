"""Does the progress display slow a run? The same in-process run with no display, rich's
live bar (drawn to a forced terminal writing to /dev/null) and plain lines (every 0.1 s
instead of 5 s, to exaggerate). Two workloads: 5,000 items of a compute-only pipeline (the
most item callbacks per second: the worst case) and 150 items x 3 jurors on the fake server.
Best of 5, interleaved. Prints the table recorded in bench/RESULTS.md.

    python bench/progress.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from rich.console import Console  # noqa: E402

from fakellm import FakeLLM, Reply  # noqa: E402
from runner.api import ItemSource, run_pipeline  # noqa: E402
from runner.engine.progress import LiveBar, PlainLines, Quiet  # noqa: E402
from runner.runs.request import RunOptions  # noqa: E402

COMPUTE = """
version: 1
name: bench_compute
steps: [{id: s, uses: compute, with: {v: "{{ item.n * 2 }}"}}]
output: {v: "{{ steps.s.v }}"}
"""

JURY = """
version: 1
name: bench_jury
env: [FAKE_URL]
models:
  a: {model: openai/a, api_base: "{{ env.FAKE_URL }}"}
  b: {model: openai/b, api_base: "{{ env.FAKE_URL }}"}
  c: {model: openai/c, api_base: "{{ env.FAKE_URL }}"}
steps:
  - id: jury
    uses: jury
    with: {models: [a, b, c], prompt: "Judge {{ item.n }}", json: true, vote: {field: verdict}}
output: {verdict: "{{ steps.jury.verdict }}"}
"""


def displays(sink):
    return {"none": Quiet, "rich live bar": lambda: LiveBar(Console(file=sink, force_terminal=True, width=120)),
            "plain lines": lambda: PlainLines(sink, interval=0.1)}


def timed(root: Path, pipeline: Path, items: Path, progress, cache: Path) -> float:
    out = Path(tempfile.mkdtemp(dir=root))
    started = time.perf_counter()
    run_pipeline(pipeline, ItemSource(items), RunOptions(cache_dir=cache, out_dir=out, llm_concurrency=16), [],
                 progress)
    return time.perf_counter() - started


def measure(root: Path, name: str, text: str, count: int, sink) -> dict[str, float]:
    pipeline = root / f"{name}.yaml"
    pipeline.write_text(text, encoding="utf-8")
    items = root / f"{name}.json"
    items.write_text(json.dumps([{"n": n} for n in range(count)]), encoding="utf-8")
    best: dict[str, float] = {}
    for attempt in range(5):
        for label, make in displays(sink).items():
            cache = root / f"cache-{name}-{label}-{attempt}"        # every run sends its calls (no cache hits)
            best[label] = min(best.get(label, 1e9), timed(root, pipeline, items, make(), cache))
    return best


def main() -> None:
    server = FakeLLM().start()
    server.script(Reply(json.dumps({"verdict": "VALID"}), delay=0.005))
    os.environ["FAKE_URL"] = server.url
    try:
        with tempfile.TemporaryDirectory() as tmp, open(os.devnull, "w") as sink:
            root = Path(tmp)
            rows = [("5,000 items, compute only", measure(root, "compute", COMPUTE, 5000, sink)),
                    ("150 items x 3 jurors, fake server", measure(root, "jury", JURY, 150, sink))]
    finally:
        server.stop()
    print("| workload | no display | rich live bar | plain lines (0.1 s) | live bar / none | plain / none |")
    print("|---|---|---|---|---|---|")
    for label, best in rows:
        none, live, plain = best["none"], best["rich live bar"], best["plain lines"]
        print(f"| {label} | {none:.2f} s | {live:.2f} s | {plain:.2f} s | {live / none:.2f}x | {plain / none:.2f}x |")


if __name__ == "__main__":
    main()
