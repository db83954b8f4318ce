"""`--executor processes`: blocks of items run in `--workers` spawned processes on this machine
(default: one per CPU), through the driver (driver.py), each process keeping one Runtime for
its life (process_worker.py). The driver's event loop serves the models' limits to them over
a Unix socket (limits_socket.py), so a model's `concurrency` and `requests_per_minute` hold
for the run as a whole; the LLM cache and the daily budgets are diskcache folders every
process opens itself. When the run ends or stops, the stop event ends any block still running."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import asynccontextmanager
from typing import Any

from runner.engine.context import Runtime
from runner.engine.executors import process_worker
from runner.engine.executors.choice import ExecutorChoice
from runner.engine.executors.driver import BlockRunner, absolute
from runner.engine.executors.limits import LimitsOwner
from runner.engine.executors.limits_socket import serve
from runner.errors import RunnerError
from runner.inputs import Item


class ProcessBlocks:
    """Blocks run by the pool's processes (any free one: `worker` only counts the slots)."""

    def __init__(self, pool: ProcessPoolExecutor, workers: int) -> None:
        self.pool = pool
        self.workers = workers

    async def run(self, worker: int, block: list[Item], concurrency: int) -> dict[str, Any]:
        try:
            answer: dict[str, Any] = await asyncio.wrap_future(
                self.pool.submit(process_worker.run_block, block, concurrency))
        except BrokenProcessPool as exc:
            raise RunnerError(f"--executor processes: a worker process ended before its block did ({exc})") from None
        return answer


@asynccontextmanager
async def on_processes(choice: ExecutorChoice, runtime: Runtime) -> AsyncIterator[BlockRunner]:
    options = absolute(runtime.options)
    workers = choice.workers or os.cpu_count() or 1
    folder = tempfile.mkdtemp(prefix="runner-")          # only this user may enter it
    try:
        path = os.path.join(folder, "limits")
        server = await serve(LimitsOwner(options.cache_dir), path)
        context = multiprocessing.get_context("spawn")
        stop = context.Event()
        pool = ProcessPoolExecutor(workers, mp_context=context, initializer=process_worker.start,
                                   initargs=(runtime.pipeline, options, runtime.role.kind, os.getcwd(), path,
                                             stop, workers))
        try:
            yield ProcessBlocks(pool, workers)
        finally:
            stop.set()          # a block still running ends now
            await asyncio.to_thread(pool.shutdown, wait=True, cancel_futures=True)
            server.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
