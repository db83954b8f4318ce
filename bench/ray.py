"""`--executor ray` against the local executor on this machine, as whole `runner run`
processes (start-up included; a Ray run without --ray-address starts Ray on this machine):

  CPU-bound: the citation judge over N generated citations (default 100,000) with every
             juror seat off (reading the cited lines and matching the quote, with 60 lines
             of context around each), local vs Ray with 1 and 2 workers;
  LLM-bound: 20,000 citations x 3 jurors against the fake server (50 ms a call, 64 calls
             in flight a worker), the same three.

Each Ray run's results are checked against the local run's (timings aside). Wall time, the
driver's own CPU and peak RSS (Ray's workers are processes of their own).

    python bench/ray.py [N]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

from big_runs import ANSWER, JURORS, generate  # noqa: E402
from throughput import Process, measured  # noqa: E402

from fakellm import FakeLLM, Reply  # noqa: E402

EXECUTORS = {"local": [], "ray, 1 worker": ["--executor", "ray", "--workers", "1"],
             "ray, 2 workers": ["--executor", "ray", "--workers", "2"]}


def run(work: Path, out: str, extra: list[str]) -> Process:
    """The runner process: wall time, its CPU (wait4) and its own peak RSS (VmHWM, read while
    it runs: wait4's maximum would include the Ray processes it started and reaped)."""
    args = [sys.executable, "-m", "runner.cli.app", "run", str(REPO / "pipelines" / "citation_judge.yaml"),
            "--input", "report.md", "--out", out, "--cache-dir", str(work / f"cache-{out}"), "--quiet", *extra]
    done = measured(args, work, ok=(0, 3), children=False)     # Ray's GCS and raylet are its children
    return done


def results(folder: Path) -> list[str]:
    lines = []
    for line in (folder / "results.jsonl").read_text(encoding="utf-8").splitlines():
        result = json.loads(line)
        result.pop("duration_ms", None)
        for vote in ((result.get("step_3_semantic") or {}).get("votes") or []):
            vote.pop("latency_ms", None)
        lines.append(json.dumps(result, sort_keys=True))
    return lines


def table(title: str, work: Path, extra: list[str]) -> None:
    print(f"\n{title}\n\n| executor | wall | vs local | driver CPU | driver peak RSS | results as local |")
    print("|---|---|---|---|---|---|")
    local_wall, same = 0.0, ""
    for n, (name, flags) in enumerate(EXECUTORS.items()):
        done = run(work, f"out{n}", [*extra, *flags])
        wall, cpu, rss = done.wall, done.cpu, done.rss_mb
        if n == 0:
            local_wall = wall
        else:
            same = "yes" if results(work / f"out{n}") == results(work / "out0") else "NO"
        print(f"| {name} | {wall:.1f} s | {local_wall / wall:.2f}x | {cpu:.1f} s | {rss:.0f} MB | {same or '-'} |",
              flush=True)


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    off = [arg for seat, _ in JURORS for arg in ("--set", f"models.{seat}.enabled=false")]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "cpu"
        generate(count, work)
        table(f"CPU-bound: {count:,} citations, jurors off, 60 lines of context", work,
              [*off, "--set", "params.context_lines=60"])
    server = FakeLLM().start()
    server.script(Reply(ANSWER, delay=0.05))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp) / "llm"
            generate(20_000, work, unique=True)
            jurors = ["--concurrency", "64"]
            for seat, model in JURORS:
                jurors += ["--set", f"models.{seat}.model=openai/{model}",
                           "--set", f"models.{seat}.api_base={server.url}", "--set", f"models.{seat}.enabled=true",
                           "--set", f"models.{seat}.limits={{concurrency: 64}}"]
            table("LLM-bound: 20,000 citations x 3 jurors, fake server at 50 ms, 64 calls in flight per worker "
                  "and model", work, jurors)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
