"""`--executor processes`: blocks of items run in `--workers` spawned processes on this machine
(default: one per CPU), through the driver (driver.py).

Each process keeps one event loop and one BlockWorker (worker.py) for its life, running the
blocks the pool hands it one at a time, and opens the LLM cache and the daily budgets itself
(diskcache folders are safe across processes). The driver's event loop serves the models'
limits to them over a Unix socket (limits_socket.py), so a model's `concurrency` and
`requests_per_minute` hold for the run as a whole. Ctrl-C is the driver's: a worker ignores
SIGINT, and when the run ends or stops, the stop event ends any block still running. A
worker's Runtime is closed at exit (a spawned process ends through sys.exit)."""

from __future__ import annotations

import asyncio
import atexit
import functools
import multiprocessing
import os
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator, Coroutine
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import asynccontextmanager
from dataclasses import dataclass
from multiprocessing.synchronize import Event
from typing import Any

from runner.engine.context import Runtime
from runner.engine.executors.choice import ExecutorChoice
from runner.engine.executors.driver import BlockRunner, absolute
from runner.engine.executors.limits import LimitsOwner, SharedLimits
from runner.engine.executors.limits_socket import LimitsClient, serve
from runner.engine.executors.worker import BlockWorker
from runner.errors import RunnerError
from runner.inputs import Item
from runner.llm.cache.store import open_caches
from runner.llm.client.limits import DailyBudget
from runner.pipeline.model import Pipeline
from runner.runs.request import RunOptions

STOP_CHECK_SECONDS = 0.2      # how soon a running block sees the driver's stop


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
        pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_start,
                                   initargs=(runtime.pipeline, options, runtime.role.kind, os.getcwd(), path,
                                             stop, workers))
        try:
            yield BlockRunner(workers, functools.partial(_submit, pool))
        finally:
            stop.set()          # a block still running ends now
            await asyncio.to_thread(pool.shutdown, wait=True, cancel_futures=True)
            server.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def _submit(pool: ProcessPoolExecutor, worker: int, block: list[Item], concurrency: int) -> dict[str, Any]:
    """A block run by any free process of the pool (`worker` only counts the slots)."""
    try:
        answer: dict[str, Any] = await asyncio.wrap_future(pool.submit(_run_block, block, concurrency))
    except BrokenProcessPool as exc:
        raise RunnerError(f"--executor processes: a worker process ended before its block did ({exc})") from None
    return answer


@dataclass
class _Process:
    """What a worker process keeps for its life."""

    loop: asyncio.AbstractEventLoop
    worker: BlockWorker
    limits: LimitsClient
    stop: Event


_this: _Process | None = None


def _start(pipeline: Pipeline, options: RunOptions, kind: str, cwd: str, limits_path: str, stop: Event,
           workers: int) -> None:
    """The pool's initializer: this process's loop, worker and connection to the run's limits
    (`kind`: the run's RunRole.kind; `workers`: how many processes the pool has)."""
    global _this
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    client = LimitsClient(limits_path)
    loop.run_until_complete(client.connect())
    limits = SharedLimits(client, lambda: DailyBudget(options.cache_dir), workers * options.llm_concurrency)
    worker = BlockWorker(pipeline, options, kind, cwd, open_caches(pipeline, options.cache_dir), limits)
    _this = _Process(loop, worker, client, stop)
    atexit.register(_close)


def _run_block(items: list[Item], concurrency: int) -> dict[str, Any]:
    """One block's answer (worker.py), or RunnerError when the driver stopped it."""
    if _this is None:
        raise RunnerError("this worker process was never started")
    return _this.loop.run_until_complete(_unless_stopped(_this, _this.worker.run_block(items, concurrency)))


async def _unless_stopped(this: _Process, block: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    task = asyncio.ensure_future(block)
    while not task.done():
        await asyncio.wait([task], timeout=STOP_CHECK_SECONDS)
        if this.stop.is_set() and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise RunnerError("stopped by the driver")
    return task.result()


def _close() -> None:
    if _this is not None:
        _this.loop.run_until_complete(_this.worker.close())
        _this.loop.run_until_complete(_this.limits.close())
        _this.loop.close()
