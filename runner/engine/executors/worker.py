"""A worker of `--executor processes` or `--executor ray`: the engine of a local run, built
once, run over one block of items at a time.

A block's answer is its results and what the driver adds up for the summary (LLM counts and
call logs, jury agreement sums, run warnings, memo counts), each taken per block by
subtraction (another block may still be adding to the same counters), so a block run again
after its worker was lost is counted once."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from runner.engine.context import RunRole, Runtime
from runner.engine.execute import run_items
from runner.engine.executors.limits import SharedLimits
from runner.engine.run_warnings import run_warnings
from runner.engine.steps.jury import take_agreements
from runner.inputs import Item
from runner.llm.cache.store import JsonCache
from runner.llm.worker_report import take_report
from runner.pipeline.model import Pipeline
from runner.runs.request import RunOptions


class BlockWorker:
    def __init__(self, pipeline: Pipeline, options: RunOptions, kind: str, cwd: str | Path,
                 caches: dict[str, JsonCache], limits: SharedLimits) -> None:
        """`kind`: the driver's run's (RunRole.kind); `caches`: the run's caches as this worker
        reaches them; `limits`: the models' limits, held for every worker of the run at once."""
        os.chdir(cwd)           # relative paths (inputs, sources, params) resolve as on the driver
        self.runtime = Runtime.create(pipeline, options, RunRole(kind, worker=True))
        self.runtime.open_caches = caches
        self.runtime.shared_limits = limits

    async def run_block(self, items: list[Item], concurrency: int) -> dict[str, Any]:
        runtime = self.runtime
        finished: list[tuple[int, dict[str, Any]]] = []
        await run_items(runtime, items, concurrency, lambda position, result: finished.append((position, result)))
        positions = [position for position, _ in finished]
        memo, reused = runtime.memo, (0, 0)
        if memo is not None:            # taken by subtraction, as the LLM counts (worker_report.py)
            reused = (memo.hits, memo.stored)
            memo.hits -= reused[0]
            memo.stored -= reused[1]
        return {"results": [result for _, result in finished], "positions": positions,
                "llm": take_report(runtime.llm, positions) if runtime.llm_used else None,
                "juries": take_agreements(runtime),
                "warnings": run_warnings(runtime),
                "memo": reused}

    async def close(self) -> None:
        await self.runtime.aclose()
