"""`--executor ray`: blocks of items run in Ray actors (RayWorker) through the driver
(driver.py), one per CPU by default, spread over the cluster's nodes (Ray's SPREAD: best
effort). The LLM cache (a worker on another machine cannot see the driver's disk) and the
models' limits (limits.py) are served from actors on the driver's node. A dead actor restarts
and Ray retries its block (max_restarts, max_task_retries), on another node when its node is
gone; a block's results reach the driver once, when it ends, and the shared cache means a retry
repeats no answered call. A stopped run tells every actor to stop (`stop`, beside its running
blocks): each running block answers the items it finished, kept as any block's; then the actors
are killed. ray is imported where it is called: ExecutorChoice.check() found it before the run began."""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

from runner.engine.context import Runtime
from runner.engine.executors.choice import ExecutorChoice
from runner.engine.executors.driver import IN_FLIGHT_PER_WORKER, BlockRunner, BlockWorker, absolute
from runner.engine.executors.limits import LimitsOwner, SharedLimits
from runner.errors import RunnerError
from runner.inputs import Item
from runner.llm.cache.store import JsonCache, open_caches
from runner.llm.client.limits import BudgetSpent
from runner.pipeline.model import Pipeline
from runner.runs.request import RunOptions

# Tests set it to make every worker ask the cache actor, as one on another machine does.
REMOTE_CACHE_ENV = "RUNNER_RAY_REMOTE_CACHE"


def _connect(ray: Any, choice: ExecutorChoice, runtime: Runtime) -> bool:
    """Join --ray-address, or start a Ray instance on this machine; True when this run started it."""
    if ray.is_initialized():
        return False
    try:
        # "local": a new instance on this machine, never a cluster that happens to run here; the
        # pipeline's declared variables (API keys, endpoints) reach every worker.
        ray.init(address=choice.ray_address or "local", include_dashboard=False, log_to_driver=False,
                 configure_logging=False, runtime_env={"env_vars": runtime.env} if runtime.env else None)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RunnerError(f"--executor ray: cannot reach the Ray cluster"
                          f"{' at ' + choice.ray_address if choice.ray_address else ''}: {exc}") from None
    return True


async def _run_on(ray: Any, actors: list[Any], worker: int, block: list[Item], concurrency: int) -> dict[str, Any]:
    """A block run by the actor `worker` (the one whose block just ended)."""
    ref = actors[worker].run_block.remote(block, concurrency)
    try:
        answer: dict[str, Any] = await ref
    except ray.exceptions.RayError as exc:
        raise RunnerError(f"--executor ray: a block of items was lost: {exc}") from None
    except BaseException:           # the run stops: so does the block
        ray.cancel(ref)
        raise
    return answer


@asynccontextmanager
async def on_ray(choice: ExecutorChoice, runtime: Runtime) -> AsyncIterator[BlockRunner]:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    started = _connect(ray, choice, runtime)
    options = absolute(runtime.options)
    actors: list[Any] = []
    try:
        driver_node = ray.get_runtime_context().get_node_id()
        here = NodeAffinitySchedulingStrategy(node_id=driver_node, soft=False)
        cache_owner = ray.remote(JsonCache).options(scheduling_strategy=here, num_cpus=0).remote(
            options.cache_dir / "responses")
        limits_owner = ray.remote(LimitsOwner).options(scheduling_strategy=here, num_cpus=0,
                                                       max_concurrency=100_000).remote(str(options.cache_dir))
        actors += [cache_owner, limits_owner]
        count = choice.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        # num_cpus=0 and SPREAD: one worker per CPU by default, spread over the nodes, and never
        # left waiting for a CPU that Ray's own processes hold.
        worker_class = ray.remote(RayWorker).options(
            num_cpus=0, max_restarts=-1, max_task_retries=-1, max_concurrency=IN_FLIGHT_PER_WORKER + 1,
            scheduling_strategy="SPREAD")           # + 1: `stop` is heard while its blocks run
        workers: list[Any] = [worker_class.remote(runtime.pipeline, options, runtime.role.kind, os.getcwd(),
                                                  driver_node, cache_owner, limits_owner, count) for _ in range(count)]
        actors += workers

        def stop() -> None:
            for worker in workers:
                worker.stop.remote()
        yield BlockRunner(count, functools.partial(_run_on, ray, workers), stop)
    finally:
        for actor in actors:
            ray.kill(actor, no_restart=True)
        if started:
            ray.shutdown()


class RayWorker(BlockWorker):
    """A BlockWorker (driver.py) as a Ray async actor. It reaches the run's cache and limits
    through the driver's node: the cache folder itself when it runs there (diskcache is safe
    across processes; no round trip), else the cache actor; the limits actor always."""

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
        self._stop = False
        super().__init__(pipeline, options, kind, cwd, caches, limits, lambda: self._stop)

    def stop(self) -> None:
        """The run stopped: each running block answers what it finished; a later one starts nothing."""
        self._stop = True


class RemoteCache:
    """A JsonCache whose entries live with the cache actor (LLMService awaits `aget` and `aset`)."""

    def __init__(self, owner: Any) -> None:
        self._owner = owner

    async def aget(self, key: str) -> Any:
        return await self._owner.get.remote(key)

    async def aset(self, key: str, value: Any) -> None:
        await self._owner.set_many.remote([(key, value)])

    def close(self) -> None:
        return None


class RayLimits:
    """The limits actor's calls: its limits awaited (limits.Owner), and the daily budgets it
    counts (a worker's DailyBudget: the cache folder may be on another machine)."""

    def __init__(self, actor: Any) -> None:
        self._actor = actor

    async def acquire(self, model: str, concurrency: int, lease_seconds: float) -> int:
        return int(await self._actor.acquire.remote(model, concurrency, lease_seconds))

    async def release(self, lease: int) -> None:
        await self._actor.release.remote(lease)

    async def pace(self, model: str, per_minute: int) -> None:
        await self._actor.pace.remote(model, per_minute)

    def spend(self, model_key: str, limit: int, shown: str) -> None:
        import ray
        refused = ray.get(self._actor.spend.remote(model_key, limit, shown))
        if refused is not None:
            raise BudgetSpent(refused)

    def close(self) -> None:
        return None
