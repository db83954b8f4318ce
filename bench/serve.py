"""`runner serve` under load, against the fake server of tests/fakellm.py:

1. Throughput: 2,000 distinct items, one LLM call each, the model's `limits.concurrency` 16
   at 200 ms latency. `runner run` over them (one JSONL file) against 100 clients posting
   `judge` requests of one item each to `runner serve` (each client its items in turn). Both
   should keep 16 calls in flight, so take 2,000 / 16 x 0.2 s = 25 s at best; the server's
   peak RSS (VmHWM) is read before it stops.
2. Stored results, 50 clients at once: `GET /v1/results/{item_key}` and a `judge` request whose
   item is stored (4,000 requests each), p50 and p99 of each request's time as the clients
   see it (aiohttp, one process, 50 connections, each opened by a first request not timed),
   and the server's CPU a request (from /proc); `GET /healthz` beside them, the cheapest route,
   for the floor the framework sets.

    python bench/serve.py [--items 2000] [--clients 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from fakellm import FakeLLM, Reply  # noqa: E402

LIMIT = 16
LATENCY = 0.2
PIPELINE = f"""
version: 1
name: bench
input: {{adapter: jsonl}}
concurrency: 128
env: [BENCH_URL]
models:
  judge: {{model: openai/bench, api_base: "{{{{ env.BENCH_URL }}}}", limits: {{concurrency: {LIMIT}}}, retries: 0}}
steps:
  - id: ask
    uses: llm
    with:
      model: judge
      prompt: "Rate this text: {{{{ item.text }}}}"
      output_schema: {{type: object, required: [rating], properties: {{rating: {{type: string}}}}}}
output:
  rating: "{{{{ steps.ask.output.rating }}}}"
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def project(root: Path, items: int) -> list[dict[str, str]]:
    for folder in ("pipelines", "prompts", "schemas", "probes"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "pipelines" / "bench.yaml").write_text(PIPELINE)
    records = [{"text": f"item number {n}"} for n in range(items)]
    (root / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_once(root: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "runner.cli.app", "run", "pipelines/bench.yaml", "--input",
                           "items.jsonl", "--out", "run-out", "--cache-dir", "run-cache", "--concurrency", str(LIMIT),
                           "--quiet"], cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return time.perf_counter() - started


def start_server(root: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "runner.cli.app", "serve", "pipelines", "--port", str(port),
                                "--cache-dir", "serve-cache", "--concurrency", str(LIMIT)], cwd=root, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("runner serve did not start")


async def judge_all(url: str, records: list[dict[str, str]], clients: int) -> tuple[float, list[str]]:
    keys: list[str] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients),
                                     timeout=aiohttp.ClientTimeout(total=600)) as http:
        async def client(number: int) -> None:
            for record in records[number::clients]:
                async with http.post(f"{url}/v1/pipelines/bench/judge", json={"item": record}) as answer:
                    answer.raise_for_status()
                    keys.append((await answer.json())["results"][0]["item_key"])
        started = time.perf_counter()
        await asyncio.gather(*(client(n) for n in range(clients)))
        return time.perf_counter() - started, keys


async def latencies(url: str, requests: list[tuple[str, str, dict | None]], clients: int) -> list[float]:
    times: list[float] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients),
                                     timeout=aiohttp.ClientTimeout(total=60)) as http:
        async def send(method: str, path: str, body: dict | None) -> None:
            async with http.request(method, url + path, json=body) as answer:
                answer.raise_for_status()
                await answer.read()

        async def client(number: int) -> None:
            await send(*requests[number])          # its connection opened, untimed
            for request in requests[number::clients]:
                started = time.perf_counter()
                await send(*request)
                times.append(time.perf_counter() - started)
        await asyncio.gather(*(client(n) for n in range(clients)))
    return times


def percentiles(times: list[float]) -> str:
    cuts = statistics.quantiles(times, n=100)
    return f"p50 {cuts[49] * 1000:.1f} ms, p99 {cuts[98] * 1000:.1f} ms ({len(times)} requests)"


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measured(url: str, requests: list[tuple[str, str, dict | None]], server: int, clients: int = 50) -> str:
    """Latencies at 50 clients, and the server's CPU a request."""
    before = cpu_seconds(server)
    times = asyncio.run(latencies(url, requests, clients))
    sent = len(requests) + clients         # and each client's first, untimed
    return f"{percentiles(times)}, server CPU {(cpu_seconds(server) - before) / sent * 1000:.2f} ms a request"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=100)
    args = parser.parse_args()
    fake = FakeLLM().start()
    fake.script(Reply(json.dumps({"rating": "green"}), delay=LATENCY))
    try:
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            records = project(root, args.items)
            env = {**os.environ, "BENCH_URL": fake.url}
            print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
            best = args.items / LIMIT * LATENCY
            fake.peak_in_flight = 0
            wall = run_once(root, env)
            print(f"runner run: {args.items} items in {wall:.1f} s (best {best:.1f} s), {args.items / wall:.1f} "
                  f"items/s, peak in flight at the model {fake.peak_in_flight}")
            process, url = start_server(root, env)
            try:
                fake.peak_in_flight = 0
                served, keys = asyncio.run(judge_all(url, records, args.clients))
                print(f"runner serve, {args.clients} clients: {args.items} items in {served:.1f} s "
                      f"({served / wall:.2f}x runner run), peak in flight at the model {fake.peak_in_flight}")
                gets = [("GET", f"/v1/results/{keys[n % len(keys)]}?pipeline=bench", None) for n in range(4000)]
                judges = [("POST", "/v1/pipelines/bench/judge", {"item": records[n % len(records)]})
                          for n in range(4000)]
                sent = len(fake.requests)
                health = [("GET", "/healthz", None)] * 4000
                print(f"GET /v1/results, 50 clients: {measured(url, gets, process.pid)}")
                print(f"judge (stored), 50 clients: {measured(url, judges, process.pid)}")
                print(f"GET /healthz, 50 clients: {measured(url, health, process.pid)}")
                assert len(fake.requests) == sent, "a stored judge request sent a call"
                print(f"server peak RSS: {peak_rss_mb(process.pid):.0f} MB")
            finally:
                process.terminate()
                process.wait(60)
            print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
