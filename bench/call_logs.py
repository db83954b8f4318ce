"""A cached call's log in a run folder: hard link to a log kept beside the cache (before
issue 31), a copy of it (issue 31), or written anew from the messages and the cached answer
(now, issue 26: no kept log, so a cold call creates one file instead of two).

First the files alone: 600 logs of a cached run's size (a 3 KB prompt, a 400-byte answer),
each way in turn, best of 5 rounds; the store and the run folders on one file system, as a
run's cache and out folder usually are. Then whole fully cached runs of 600 calls (one llm
step, 600 items, in this process), median of 7. A hard link shared the cache's file with
every run (an edit to one rewrote all, and the umask of later runs was ignored); a copy or
a new file is the run's own.

    python bench/call_logs.py"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from fakellm import FakeLLM, Reply  # noqa: E402
from runner.fileio import open_own  # noqa: E402

LOGS = 600
ROUNDS = 5
BODY = ("=== PROMPT ===\n" + "claim and source text " * 140 + "\n\n=== RESPONSE ===\n" + '{"verdict": "VALID"} ' * 20
        ).encode()


def link(store: str, target: str) -> None:
    os.link(store, target)


def copy_file(source: str, target: str) -> None:
    src = os.open(source, os.O_RDONLY)
    try:
        dst = open_own(target)
        try:
            os.copy_file_range(src, dst, os.fstat(src).st_size)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def write(store: str, target: str) -> None:
    fd = open_own(target)
    try:
        os.write(fd, BODY)
    finally:
        os.close(fd)


WAYS: dict[str, Callable[[str, str], None]] = {"hard link (before issue 31)": link,
                                               "copy_file_range (issue 31)": copy_file, "written anew (now)": write}


PIPELINE = """
version: 1
name: logs
env: [FAKE_URL]
models: {m: {model: openai/m1, api_base: "{{ env.FAKE_URL }}", limits: {concurrency: 16}}}
concurrency: 16
steps: [{id: ask, uses: llm, with: {model: m, prompt: "Question {{ item.q }}: " , json: true}}]
output: {a: "{{ steps.ask.output.a }}"}
"""


def cached_run(root: Path) -> float:
    """Median wall time of a fully cached 600-call run."""
    from helpers import run
    server = FakeLLM().start()
    try:
        server.script(Reply(json.dumps({"a": "yes " * 60})))
        os.environ["FAKE_URL"] = server.url
        (root / "pipelines").mkdir()
        pipeline = root / "pipelines" / "logs.yaml"
        prompt = '"Question {{ item.q }}: ' + "context " * 300 + '"'      # a prompt of about 2.4 KB
        pipeline.write_text(PIPELINE.replace('"Question {{ item.q }}: "', prompt))
        items = root / "in.json"
        items.write_text(json.dumps([{"q": n} for n in range(LOGS)]))
        run(pipeline, items, out=root / "cold", cache_dir=root / "cache")
        times = []
        for attempt in range(7):
            started = time.perf_counter()
            run(pipeline, items, out=root / f"cached{attempt}", cache_dir=root / "cache")
            times.append(time.perf_counter() - started)
        assert len(server.requests) == LOGS
        return statistics.median(times)
    finally:
        server.stop()


def main() -> None:
    with tempfile.TemporaryDirectory(dir=Path(__file__).resolve().parent) as root:
        store = Path(root) / "call_logs"
        store.mkdir()
        for n in range(LOGS):
            (store / f"{n}.txt").write_bytes(BODY)
        best = {name: float("inf") for name in WAYS}
        for attempt in range(ROUNDS):
            for name, way in WAYS.items():
                folder = Path(root) / f"{attempt}-{list(WAYS).index(name)}"
                folder.mkdir()
                started = time.perf_counter()
                for n in range(LOGS):
                    way(str(store / f"{n}.txt"), str(folder / f"m_{n + 1:04d}_item{n + 1}.txt"))
                best[name] = min(best[name], time.perf_counter() - started)
        base = best["hard link (before issue 31)"]
        print(f"| way | {LOGS} logs, best of {ROUNDS} | per log | vs hard link |")
        print("|---|---|---|---|")
        for name, seconds in best.items():
            print(f"| {name} | {seconds * 1000:.1f} ms | {seconds / LOGS * 1e6:.0f} us | {seconds / base:.1f}x |")
    with tempfile.TemporaryDirectory(dir=Path(__file__).resolve().parent) as root:
        print(f"\nfully cached run of {LOGS} calls, logs written anew: {cached_run(Path(root)):.3f} s (median of 7)")


if __name__ == "__main__":
    main()
