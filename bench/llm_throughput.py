"""Throughput of runner's LLM path (HTTP transport for `openai/` models, cache writes,
logs) against bare httpx, for 600 calls at concurrency 16 on the fake server (10 ms
latency). Both sides run in this process after their imports, so the ratio is the
per-call overhead.

    python bench/llm_throughput.py
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from fakellm import FakeLLM, Reply  # noqa: E402

CALLS, CONCURRENCY = 600, 16


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def runner_side(url: str, work: Path) -> tuple[float, float]:
    from runner.api import ItemSource, run_pipeline
    from runner.llm.client.transport import import_litellm
    from runner.runs.request import RunOptions

    import_litellm()                          # measured separately: import time is not per-call cost
    (work / "pipelines").mkdir()
    (work / "pipelines" / "p.yaml").write_text(textwrap.dedent(f"""
        version: 1
        name: bench
        concurrency: {CONCURRENCY}
        models: {{m: {{model: openai/bench, api_base: "{url}", limits: {{concurrency: {CONCURRENCY}}}}}}}
        steps: [{{id: ask, uses: llm, with: {{model: m, prompt: "Item {{{{ item.n }}}}", json: true}}}}]
        output: {{ok: "{{{{ steps.ask.output.ok }}}}"}}
        """))
    (work / "in.json").write_text(json.dumps([{"n": n} for n in range(CALLS)]))
    options = RunOptions(cache_dir=work / "cache", out_dir=work / "out", llm_concurrency=CONCURRENCY)
    started, used = time.perf_counter(), cpu()
    outcome = run_pipeline(work / "pipelines" / "p.yaml", ItemSource(work / "in.json"), options)
    assert all(r["ok"] for r in outcome.results)
    return time.perf_counter() - started, cpu() - used


def httpx_side(url: str) -> tuple[float, float]:
    import httpx

    async def go() -> None:
        gate = asyncio.Semaphore(CONCURRENCY)
        async with httpx.AsyncClient(timeout=30) as client:
            async def one(n: int) -> None:
                async with gate:
                    response = await client.post(f"{url}/chat/completions", json={
                        "model": "bench", "messages": [{"role": "user", "content": f"Item {n}"}]})
                    json.loads(response.json()["choices"][0]["message"]["content"])
            await asyncio.gather(*(one(n) for n in range(CALLS)))

    started, used = time.perf_counter(), cpu()
    asyncio.run(go())
    return time.perf_counter() - started, cpu() - used


def main() -> None:
    server = FakeLLM().start()
    server.script(Reply('{"ok": true}', delay=0.01))
    started = time.perf_counter()
    from runner.llm.client.transport import import_litellm
    import_litellm()
    import_seconds = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        wall_r, cpu_r = runner_side(server.url, Path(tmp))
    wall_h, cpu_h = httpx_side(server.url)
    server.stop()
    print(f"| path ({CALLS} calls, concurrency {CONCURRENCY}) | wall | CPU per call |\n|---|---|---|")
    print(f"| runner (http transport, cache, logs) | {wall_r:.2f} s | {cpu_r / CALLS * 1000:.1f} ms |")
    print(f"| bare httpx | {wall_h:.2f} s | {cpu_h / CALLS * 1000:.1f} ms |")
    print(f"\nrunner / httpx: {wall_r / wall_h:.1f}x wall, {cpu_r / cpu_h:.1f}x CPU per call; "
          f"import litellm: {import_seconds:.1f} s (paid only on a cache miss)")


if __name__ == "__main__":
    main()
