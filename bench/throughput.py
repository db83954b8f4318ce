"""Throughput of the OpenAI-compatible path at 16, 64 and 256 calls in flight, as whole
processes in one run: runner cold, its fully cached rerun, and two floors sending the very
requests runner sent (bare aiohttp, bare httpx) at the same number in flight.

The citation judge, every seat on the fake server with `limits.concurrency` = `--concurrency`
= the pipeline's `concurrency` = N:
  16 in flight: 200 citations x 3 jurors at 0.2 s latency (bench/openai_compat.py's run);
  64 and 256:   2,000 citations x 3 jurors at 50 ms latency.
As in the issue, 86.9% of the citations reach the jury (5,214 calls for 2,000; 522 for 200);
the rest misquote their source and stop at the quote check (openai_compat.report()).
Per process: wall, CPU (user + system, from wait4: a child's waited-for children included) and
peak RSS (VmHWM, with its children's). A first cold run, not counted, warms the machine and
gives the requests the floors send. The aiohttp floor and runner cold (and at 256 in flight,
runner cold with `--executor processes --workers 2`, each worker given half the calls in
flight and half the pipeline's items at once, so that the server sees the floor's 256) then
run in turn five times (runner with a fresh cache each time), and the median of each is
compared (with three turns, one scenario in sixteen moved past 1.3x on a fast spell of the
floor); the cached rerun is the median of three.

    python bench/throughput.py              # all three; or e.g. `python bench/throughput.py 64`
    python bench/throughput.py --tmp /dev/shm   # the work folders on another file system
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from installed_env import INSTALLED_ENV  # noqa: E402
from openai_compat import ANSWER, FLOOR, JURORS, report  # noqa: E402

from fakellm import FakeLLM, Reply  # noqa: E402

SCENARIOS = {16: (200, 0.2), 64: (2000, 0.05), 256: (2000, 0.05)}     # in flight: (citations, latency)
RERUNS = 3
COLD_PAIRS = 5
WORKERS = 2
PROCESSES = ("--executor", "processes", "--workers", str(WORKERS))
PROCESSES_FROM = 256      # the scenarios (calls in flight) that also run runner with PROCESSES
AIOHTTP_FLOOR = """
import asyncio, json, sys
import aiohttp
url, bodies, concurrency = sys.argv[1], json.load(open(sys.argv[2])), int(sys.argv[3])
async def main():
    gate = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        async def one(body):
            async with gate:
                async with session.post(url + "/chat/completions", json=body) as r:
                    json.loads(json.loads(await r.read())["choices"][0]["message"]["content"])
        await asyncio.gather(*(one(body) for body in bodies))
asyncio.run(main())
"""


@dataclass
class Process:
    wall: float
    user: float
    system: float
    rss_mb: float
    output: str

    @property
    def cpu(self) -> float:
        return self.user + self.system


def peak_rss_mb(pid: int, done: threading.Event, seen: list[float], children: bool = True) -> None:
    """The child's own high-water mark (VmHWM), plus its children's unless `children` is
    False, read until it exits. wait4's ru_maxrss will not do: a child inherits its parent's
    high-water mark, and this process holds every request the fake server recorded."""
    marks: dict[int, float] = {}
    while not done.is_set():
        family = [pid]
        try:
            if children:
                with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as listed:
                    family += [int(child) for child in listed.read().split()]
        except (OSError, ValueError):
            pass
        for member in family:
            try:
                with open(f"/proc/{member}/status", encoding="ascii") as status:
                    for line in status:
                        if line.startswith("VmHWM:"):
                            marks[member] = int(line.split()[1]) / 1024
            except (OSError, ValueError):
                pass
        if marks:
            seen.append(sum(marks.values()))
        done.wait(0.02)


def measured(args: list[str], cwd: Path, ok: tuple[int, ...] = (0,), children: bool = True) -> Process:
    """One whole process: its wall time, its own CPU time (wait4) and peak RSS (with its
    children's unless `children` is False)."""
    with tempfile.TemporaryFile("w+") as out:
        started = time.perf_counter()
        child = subprocess.Popen(args, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, text=True, env=INSTALLED_ENV)
        done, seen = threading.Event(), [0.0]
        watcher = threading.Thread(target=peak_rss_mb, args=(child.pid, done, seen, children), daemon=True)
        watcher.start()
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        done.set()
        watcher.join()
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        output = out.read()
    if child.returncode not in ok:
        raise SystemExit(f"{args[:4]} exited {child.returncode}:\n{output[-3000:]}")
    return Process(wall, usage.ru_utime, usage.ru_stime, max(seen), output)


def runner_run(work: Path, cache: Path, out: str, url: str, in_flight: int, *extra: str) -> Process:
    """`runner run` with `in_flight` calls at once, shared by its workers when it has some
    (`--concurrency` and the pipeline's items at once are a worker's own; a model's limit is
    the run's)."""
    workers = WORKERS if "--workers" in extra else 1
    args = [sys.executable, "-m", "runner.cli.app", "run", str(REPO / "pipelines" / "citation_judge.yaml"),
            "--input", "report.md", "--out", out, "--cache-dir", str(cache),
            "--concurrency", str(in_flight // workers), "--set", f"concurrency={in_flight // workers}", "--quiet",
            *extra]
    for seat, model in (("local", "local-model"), ("gemini", "gemini-fake"), ("openai", "gpt-fake")):
        args += ["--set", f"models.{seat}.model=openai/{model}", "--set", f"models.{seat}.api_base={url}",
                 "--set", f"models.{seat}.enabled=true", "--set", f"models.{seat}.limits={{concurrency: {in_flight}}}"]
    done = measured(args, work)
    assert "errors: 0" in done.output, done.output[-3000:]
    return done


def scenario(in_flight: int, top: Path) -> tuple[list[tuple[str, Process, int]], int]:
    citations, latency = SCENARIOS[in_flight]
    server = FakeLLM().start()
    server.script(Reply(ANSWER, delay=latency))
    rows = []
    try:
        tmp = top / f"in-flight-{in_flight}"
        work = tmp / "example"
        shutil.copytree(REPO / "examples" / "citation_judge", work)
        jury = report(work, citations)
        # A first cold run, not counted, warms what any first process pays for (the page
        # cache, the server's threads) and gives the requests the floors send.
        runner_run(work, tmp / "warm-up", "warm-up", server.url, in_flight)
        if len(server.requests) != JURORS * jury:
            raise SystemExit(f"runner sent {len(server.requests)} calls, not {JURORS} x {jury}: not issue 26's mix")
        bodies = tmp / "bodies.json"
        bodies.write_text(json.dumps([r.body for r in server.requests]), encoding="utf-8")

        def counted(run: Callable[[], Process]) -> tuple[Process, int]:
            # The server keeps each request it is sent: forgotten before each run, so that it
            # does not hold (and walk, collecting) the 30,000 of a whole scenario.
            server.requests.clear()
            done = run()
            return done, len(server.requests)

        def floor(script: str) -> tuple[Process, int]:
            return counted(lambda: measured([sys.executable, "-c", script, server.url, str(bodies), str(in_flight)],
                                            work))

        def cache(run_name: str) -> Path:
            return tmp / f"cache-{run_name}"

        def cold(n: int, label: str = "", *extra: str) -> tuple[Process, int]:
            name = f"cold{n}{label}"
            return counted(lambda: runner_run(work, cache(name), name, server.url, in_flight, *extra))

        # The floor and runner cold (and with worker processes) in turn, COLD_PAIRS times, each
        # the median of its runs: on this VM a process's system time for the same work varies
        # 5x with whether the pages it writes were handed back to the host (see RESULTS.md).
        with_processes = in_flight >= PROCESSES_FROM
        turns = [(floor(AIOHTTP_FLOOR), cold(n), *([cold(n, "-processes", *PROCESSES)] if with_processes else []))
                 for n in range(COLD_PAIRS)]

        def median(runs: list[tuple[Process, int]]) -> tuple[Process, int]:
            return sorted(runs, key=lambda run: run[0].wall)[COLD_PAIRS // 2]

        colds = sorted((turn[1] for turn in turns), key=lambda run: run[0].wall)
        rows.append(("bare aiohttp (the floor), median", *median([turn[0] for turn in turns])))
        rows.append(("bare httpx", *floor(FLOOR)))
        calls = colds[COLD_PAIRS // 2][1]
        rows.append(("runner, cold, median", *colds[COLD_PAIRS // 2]))
        rows.append(("runner, cold, best", *colds[0]))
        if with_processes:
            rows.append((f"runner, cold, `{' '.join(PROCESSES)}`, median", *median([turn[2] for turn in turns])))
        # A cached rerun is short enough for the machine's noise to move it by a third: the median.
        reruns = sorted((counted(lambda n=n: runner_run(work, cache("cold0"), f"cached{n}", server.url, in_flight))
                         for n in range(RERUNS)), key=lambda done: done[0].wall)
        rows.append((f"runner, fully cached rerun (median of {RERUNS})", *reruns[RERUNS // 2]))
    finally:
        server.stop()
    return rows, calls


def main() -> None:
    args = sys.argv[1:]
    where = args[args.index("--tmp") + 1] if "--tmp" in args else None
    if where:
        args = [a for a in args if a not in ("--tmp", where)]
    chosen = [int(n) for n in args[0].split(",")] if args else list(SCENARIOS)
    # One folder for every scenario, removed at the end.
    with tempfile.TemporaryDirectory(dir=where) as top:
        for in_flight in chosen:
            report_scenario(in_flight, Path(top))


def report_scenario(in_flight: int, top: Path) -> None:
    citations, latency = SCENARIOS[in_flight]
    rows, calls = scenario(in_flight, top)
    floor, cold, cached = rows[0][1], rows[2][1], rows[-1][1]
    print(f"\n{in_flight} in flight: {citations} citations x 3 jurors, {latency:g} s latency, {calls} calls\n")
    print("| process | wall | CPU (user + system) | CPU per call | peak RSS | wall / aiohttp floor | requests |")
    print("|---|---|---|---|---|---|---|")
    for name, process, requests in rows:
        per_call = f"{process.cpu / calls * 1000:.2f} ms" if requests else "-"
        print(f"| {name} | {process.wall:.2f} s | {process.cpu:.2f} s ({process.user:.2f} + {process.system:.2f}) "
              f"| {per_call} | {process.rss_mb:.0f} MB | {process.wall / floor.wall:.2f}x | {requests} |")
    print(f"\nrunner cold / aiohttp floor: {cold.wall / floor.wall:.2f}x wall, "
          f"{cold.cpu / calls * 1000:.2f} ms CPU per call ({cold.user / calls * 1000:.2f} user + "
          f"{cold.system / calls * 1000:.2f} system); cached rerun / cold: {cached.wall / cold.wall:.1%}")
    if in_flight >= PROCESSES_FROM:
        processes = rows[4][1]
        print(f"with `{' '.join(PROCESSES)}`: {processes.wall / floor.wall:.2f}x wall, "
              f"{processes.cpu / calls * 1000:.2f} ms CPU per call (the driver and its workers)")


if __name__ == "__main__":
    main()
