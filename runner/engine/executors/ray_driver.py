"""`--executor ray`: the driver side. Items go in blocks to a pool of Ray actors
(ray_worker.BlockWorker), two blocks per worker at a time, so memory holds a bounded
number of items whatever the input's size; each block's results come back whole and are
handed on in arrival order (results.jsonl is put in item order when the run ends, as
for a local run).

Faults: the actors restart and Ray retries the block a dead worker held (max_restarts,
max_task_retries), on another node when its node is gone. A block's results reach the
driver once, when the block ends, so none is written twice, and the shared cache means a
retried block repeats no call that was answered."""

from __future__ import annotations

import asyncio
import itertools
import math
import os
from collections.abc import Iterable, Iterator, Sized
from dataclasses import replace
from pathlib import Path
from typing import Any

from runner.engine.context import Runtime
from runner.engine.executors.choice import ExecutorChoice, OnResult
from runner.engine.run_warnings import add_warning
from runner.engine.steps.jury import absorb_agreements
from runner.errors import RunnerError
from runner.inputs import Item
from runner.llm.worker_report import absorb_report

BLOCKS_PER_WORKER = 4          # blocks a worker gets over a run: a lost one costs little, each is worth sending
MAX_BLOCK = 1000               # items in one block at most
IN_FLIGHT_PER_WORKER = 2       # the next block is there when one ends


def _connect(ray: Any, choice: ExecutorChoice, runtime: Runtime) -> bool:
    """Join --ray-address, or start a Ray instance on this machine; True when this run started it."""
    if ray.is_initialized():
        return False
    # The pipeline's declared variables (API keys, endpoints) reach every worker.
    env = {name: os.environ[name] for name in runtime.pipeline.env_names if name in os.environ}
    try:
        # "local": a new instance on this machine, never a cluster that happens to run here.
        ray.init(address=choice.ray_address or "local", include_dashboard=False, log_to_driver=False,
                 configure_logging=False, runtime_env={"env_vars": env} if env else None)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RunnerError(f"--executor ray: cannot reach the Ray cluster"
                          f"{' at ' + choice.ray_address if choice.ray_address else ''}: {exc}") from None
    return True


def _blocks(items: Iterable[Item], size: int) -> Iterator[list[Item]]:
    source = iter(items)
    while block := list(itertools.islice(source, size)):
        yield block


def block_size(total: int, workers: int) -> int:
    return max(1, min(MAX_BLOCK, math.ceil(total / (workers * BLOCKS_PER_WORKER))))


async def run_on_ray(choice: ExecutorChoice, runtime: Runtime, items: Iterable[Item], concurrency: int,
                     on_result: OnResult) -> int:
    import ray  # there: ExecutorChoice.check() found it before the run began
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from runner.engine.executors.ray_services import CacheOwner, LimitsOwner
    from runner.engine.executors.ray_worker import BlockWorker

    started = _connect(ray, choice, runtime)
    options = runtime.options
    absolute = replace(options, cache_dir=Path(options.cache_dir).resolve(),
                       out_dir=Path(options.out_dir).resolve() if options.out_dir else None,
                       memo_dir=Path(options.memo_dir).resolve() if options.memo_dir else None)
    workers: list[Any] = []
    owners: list[Any] = []
    running: dict[asyncio.Future[Any], tuple[int, Any]] = {}      # block: (worker, its ObjectRef)
    finished = 0
    try:
        driver_node = ray.get_runtime_context().get_node_id()
        here = NodeAffinitySchedulingStrategy(node_id=driver_node, soft=False)
        cache_owner = ray.remote(CacheOwner).options(scheduling_strategy=here, num_cpus=0).remote(
            str(absolute.cache_dir / "responses"))
        owners.append(cache_owner)
        limits_owner = ray.remote(LimitsOwner).options(scheduling_strategy=here, num_cpus=0,
                                                       max_concurrency=100_000).remote(str(absolute.cache_dir))
        owners.append(limits_owner)
        count = choice.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        # num_cpus=0 and SPREAD: one worker per CPU by default, spread over the nodes, and never
        # left waiting for a CPU that Ray's own processes hold.
        worker_class = ray.remote(BlockWorker).options(
            num_cpus=0, max_restarts=-1, max_task_retries=-1, max_concurrency=IN_FLIGHT_PER_WORKER,
            scheduling_strategy="SPREAD")
        workers += [worker_class.remote(runtime.pipeline, absolute, os.getcwd(), driver_node, cache_owner,
                                        limits_owner) for _ in range(count)]
        total = len(items) if isinstance(items, Sized) else MAX_BLOCK * count
        blocks = _blocks(items, block_size(total, count))

        def send(worker: int) -> None:
            block = next(blocks, None)
            if block is not None:
                ref = workers[worker].run_block.remote(block, concurrency)
                running[asyncio.ensure_future(_awaited(ref))] = (worker, ref)

        for worker in range(count):
            for _ in range(IN_FLIGHT_PER_WORKER):
                send(worker)
        while running:
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                worker, _ = running.pop(future)
                try:
                    answer = future.result()
                except ray.exceptions.RayError as exc:
                    raise RunnerError(f"--executor ray: a block of items was lost: {exc}") from None
                _absorb(runtime, answer)
                for result in answer["results"]:
                    finished += 1
                    maybe = on_result(result)
                    if maybe is not None:
                        await maybe
                send(worker)
    finally:
        for future, (_, ref) in running.items():    # Ctrl-C or a failure: stop the workers, keep what finished
            future.cancel()
            ray.cancel(ref)         # cancelled, not lost: Ray neither retries nor reports the block
        for actor in [*workers, *owners]:
            ray.kill(actor, no_restart=True)
        if started:
            ray.shutdown()
    return finished


def _absorb(runtime: Runtime, answer: dict[str, Any]) -> None:
    """A block's counts, added to the driver's as if it had run the block itself."""
    if answer["llm"] is not None:
        absorb_report(runtime.llm, answer["llm"])
    absorb_agreements(runtime, answer["juries"])
    for warning in answer["warnings"]:
        add_warning(runtime, warning)
    if runtime.memo is not None:
        runtime.memo.hits += answer["memo"][0]
        runtime.memo.stored += answer["memo"][1]


async def _awaited(ref: Any) -> Any:
    return await ref
