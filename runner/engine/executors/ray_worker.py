"""A Ray worker (an async actor): a BlockWorker (worker.py) that reaches the run's cache and
limits through the driver's node: the cache folder itself when it runs there (diskcache is
safe across processes; no round trip), else the cache actor; the limits actor always."""

from __future__ import annotations

import os
from typing import Any, cast

from runner.engine.executors.limits import SharedLimits
from runner.engine.executors.ray_services import RayLimits, RemoteCache
from runner.engine.executors.worker import BlockWorker
from runner.inputs import Item
from runner.llm.cache.store import JsonCache, open_caches
from runner.pipeline.model import Pipeline
from runner.runs.request import RunOptions

# Tests set it to make every worker ask the cache actor, as one on another machine does.
REMOTE_CACHE_ENV = "RUNNER_RAY_REMOTE_CACHE"


class RayWorker:
    def __init__(self, pipeline: Pipeline, options: RunOptions, kind: str, cwd: str, driver_node: str,
                 cache_owner: Any, limits_owner: Any, workers: int) -> None:
        """`workers`: how many RayWorkers the run has (each sends up to its own --concurrency)."""
        import ray
        remote = ray.get_runtime_context().get_node_id() != driver_node or os.environ.get(REMOTE_CACHE_ENV) == "1"
        # A RemoteCache serves what the LLM service asks of its cache (aget, aset, close).
        caches = ({"responses": cast(JsonCache, RemoteCache(cache_owner))} if remote and pipeline.models
                  else open_caches(pipeline, options.cache_dir))
        ray_limits = RayLimits(limits_owner)
        limits = SharedLimits(ray_limits, lambda: ray_limits, workers * options.llm_concurrency)
        self.worker = BlockWorker(pipeline, options, kind, cwd, caches, limits)

    async def run_block(self, items: list[Item], concurrency: int) -> dict[str, Any]:
        return await self.worker.run_block(items, concurrency)

    async def close(self) -> None:
        await self.worker.close()
