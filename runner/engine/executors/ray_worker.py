"""A Ray worker (an async actor): the same engine as a local run, over one block of items
at a time, built once per worker (pipeline, Runtime, LLM service, HTTP session).

A block's answer is its results and what the driver adds up for the summary: LLM counts
and the failure tally of its items, jury agreement sums, run warnings, and its calls'
lines (the driver appends them to calls.jsonl in the run folder, which a worker on another
machine cannot see). Each is taken and reset per block, so a block Ray runs again after a worker died
is counted once."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from runner.engine.context import RunOptions, Runtime
from runner.engine.execute import run_items
from runner.engine.executors.ray_services import ClusterLimits, RemoteCache
from runner.engine.run_warnings import run_warnings
from runner.engine.steps.jury import take_agreements
from runner.inputs import Item
from runner.llm.cache.store import open_caches
from runner.llm.worker_report import take_report
from runner.pipeline.model import Pipeline

# Tests set it to make every worker ask the cache actor, as one on another machine does.
REMOTE_CACHE_ENV = "RUNNER_RAY_REMOTE_CACHE"


class BlockWorker:
    def __init__(self, pipeline: Pipeline, options: RunOptions, cwd: str, driver_node: str,
                 cache_owner: Any, limits_owner: Any) -> None:
        import ray
        os.chdir(cwd)           # relative paths (inputs, sources, params) resolve as on the driver
        self.runtime = Runtime.create(pipeline, replace(options, worker=True))
        remote = ray.get_runtime_context().get_node_id() != driver_node or os.environ.get(REMOTE_CACHE_ENV) == "1"
        self.remote_cache = remote
        self.runtime.open_caches = ({"responses": RemoteCache(cache_owner)} if remote and pipeline.models
                                    else open_caches(pipeline, options.cache_dir))
        self.limits = ClusterLimits(limits_owner)

    async def run_block(self, items: list[Item], concurrency: int) -> dict[str, Any]:
        runtime = self.runtime
        results: list[dict[str, Any]] = []
        if runtime.pipeline.models:
            runtime.llm.sender.cluster_limits = self.limits
        await run_items(runtime, items, concurrency, results.append)
        indexes = [result["index"] for result in results]
        memo, reused = runtime.memo, (0, 0)
        if memo is not None:            # taken by subtraction, as the LLM counts (worker_report.py)
            reused = (memo.hits, memo.stored)
            memo.hits -= reused[0]
            memo.stored -= reused[1]
        return {"results": results,
                "llm": take_report(runtime.llm, indexes) if runtime.llm_used else None,
                "juries": take_agreements(runtime),
                "warnings": run_warnings(runtime),
                "memo": reused,
                "remote_cache": self.remote_cache}

    async def close(self) -> None:
        await self.runtime.aclose()
