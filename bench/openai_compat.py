"""The OpenAI-compatible path as whole processes, in one run: the citation judge on 200
citations x 3 jurors (522 calls: see report()) against the fake server at 0.2 s latency, concurrency 16,
next to a bare-httpx process sending the very requests runner sent (the floor), a fully cached
rerun, and the same cold run through litellm for comparison.

    python bench/openai_compat.py            # prints the table recorded in bench/RESULTS.md
"""

from __future__ import annotations

import json
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from installed_env import INSTALLED_ENV  # noqa: E402

from fakellm import FakeLLM, Reply  # noqa: E402

CITATIONS, JURORS, CONCURRENCY, LATENCY = 200, 3, 16, 0.2
RERUNS = 5
ANSWER = json.dumps({"verdict": "VALID", "substantive_quote": True, "quote_in_context": True,
                     "supports_claim": True, "reason": "scripted"})
CITATION = re.compile(r"^.*\[([\w.]+):L(\d+)(?:-L(\d+))?\]\(data/canonical/[^)]+\).*$", re.MULTILINE)
QUOTED = re.compile(r'"([^"]+)"')
JURY_SHARE = 5214 / 6000        # issue 26: "2,000 citations x 3 jurors = 5,214 calls"

FLOOR = """
import asyncio, json, sys
import httpx
url, bodies, concurrency = sys.argv[1], json.load(open(sys.argv[2])), int(sys.argv[3])
async def main():
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        async def one(body):
            async with gate:
                r = await client.post("chat/completions", json=body)
                json.loads(r.json()["choices"][0]["message"]["content"])
        await asyncio.gather(*(one(body) for body in bodies))
asyncio.run(main())
"""


def report(work: Path, citations: int = CITATIONS) -> int:
    """Write `citations` citations, each with its own claim so every prompt differs, in issue 26's
    mix (2,000 citations, 5,214 calls): JURY_SHARE of them quote their source word for word, so
    the jury runs on each, and the rest misquote it, so the quote check stops them before any
    call. Returns how many the jury runs on. (Until 2026-11-25 the bench cycled through the
    example's readable citations, three of whose quotes the example invents on purpose, and
    prefixed each unquoted claim so that its words no longer matched: 60% reached the jury.)"""
    text = (work / "report.md").read_text(encoding="utf-8")
    quoting, misquoting = [], []
    for match in CITATION.finditer(text):
        file = work / "data" / "canonical" / match.group(1)
        first, last = int(match.group(2)), int(match.group(3) or match.group(2))
        quote = QUOTED.search(match.group(0))
        lines = file.read_text(encoding="utf-8").splitlines() if file.is_file() else []
        if quote is None or last > len(lines):
            continue
        cited = " ".join(" ".join(lines[first - 1:last]).split())
        (quoting if " ".join(quote.group(1).split()) in cited else misquoting).append(match.group(0))
    jury = round(citations * JURY_SHARE)
    stopped = citations - jury
    body = []
    for n in range(citations):
        misquoted = (n + 1) * stopped // citations > n * stopped // citations    # spread evenly
        pool = misquoting if misquoted else quoting
        body.append(f"Claim {n}: {pool[n % len(pool)]}")
    (work / "report.md").write_text("# Bench\n\n" + "\n\n".join(body) + "\n", encoding="utf-8")
    return jury


CPU: dict[float, float] = {}       # wall seconds -> CPU seconds of that process


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(args: list[str], cwd: Path) -> tuple[float, str]:
    started, used = time.perf_counter(), children_cpu()
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=INSTALLED_ENV)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    CPU[elapsed] = children_cpu() - used
    return elapsed, done.stdout + done.stderr


def runner_run(work: Path, cache: Path, out: str, url: str, transport: str = "auto") -> tuple[float, str]:
    args = [sys.executable, "-m", "runner.cli.app", "run", str(REPO / "pipelines" / "citation_judge.yaml"),
            "--input", "report.md", "--out", out, "--cache-dir", str(cache), "--concurrency", str(CONCURRENCY),
            "--set", f"concurrency={CONCURRENCY}"]
    for seat, model in (("local", "local-model"), ("gemini", "gemini-fake"), ("openai", "gpt-fake")):
        args += ["--set", f"models.{seat}.model=openai/{model}", "--set", f"models.{seat}.api_base={url}",
                 "--set", f"models.{seat}.enabled=true", "--set", f"models.{seat}.transport={transport}",
                 "--set", f"models.{seat}.limits={{concurrency: {CONCURRENCY}}}"]
    return timed(args, work)


def main() -> None:
    server = FakeLLM().start()
    server.script(Reply(ANSWER, delay=LATENCY))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "example"
        shutil.copytree(REPO / "examples" / "citation_judge", work)
        jury = report(work)
        cold, output = runner_run(work, Path(tmp) / "cache", "cold", server.url)
        assert "errors: 0" in output and len(server.requests) == JURORS * jury, output
        bodies = [r.body for r in server.requests]       # the floor sends exactly what runner sent
        (Path(tmp) / "bodies.json").write_text(json.dumps(bodies), encoding="utf-8")
        sent = len(server.requests)
        floor, _ = timed([sys.executable, "-c", FLOOR, server.url, str(Path(tmp) / "bodies.json"), str(CONCURRENCY)],
                         work)
        rows.append((f"bare httpx (the floor): the same {sent} requests", floor, len(server.requests) - sent))
        rows.append(("runner, cold (http transport)", cold, sent))
        sent = len(server.requests)
        # A cached rerun is short enough for the machine's noise (another process, where the
        # file system puts a new run folder) to move it by a third: the median of five.
        reruns = sorted(runner_run(work, Path(tmp) / "cache", f"cached{n}", server.url)[0] for n in range(RERUNS))
        cached = statistics.median(reruns)
        rows.append((f"runner, fully cached rerun (median of {RERUNS}: {reruns[0]:.2f}-{reruns[-1]:.2f} s)", cached,
                     len(server.requests) - sent))
        sent = len(server.requests)
        via_litellm, _ = runner_run(work, Path(tmp) / "cache-litellm", "litellm", server.url, "litellm")
        rows.append(("runner, cold, transport: litellm", via_litellm, len(server.requests) - sent))
    server.stop()
    print(f"| process ({CITATIONS} citations x {JURORS} jurors, {LATENCY} s latency, concurrency {CONCURRENCY}) "
          "| wall | CPU | requests |\n|---|---|---|---|")
    for name, seconds, requests in rows:
        print(f"| {name} | {seconds:.2f} s | {CPU[seconds]:.2f} s | {requests} |")
    print(f"\ncold / floor: {cold / floor:.2f}x; cached / cold: {cached / cold:.1%}; "
          f"litellm cold / floor: {via_litellm / floor:.2f}x")


if __name__ == "__main__":
    main()
