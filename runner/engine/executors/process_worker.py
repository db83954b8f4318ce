"""A worker process of `--executor processes`: one event loop and one BlockWorker (worker.py)
for its life, running the blocks the pool hands it one at a time. It reaches the run's caches
itself (diskcache is safe across processes) and the models' limits through the driver
(limits_socket.py). Ctrl-C is the driver's: a worker ignores SIGINT and stops its block when
the driver sets the stop event. Its Runtime is closed at exit (a spawned process ends through
sys.exit)."""

from __future__ import annotations

import asyncio
import atexit
import signal
from collections.abc import Coroutine
from dataclasses import dataclass
from multiprocessing.synchronize import Event
from typing import Any

from runner.engine.executors.limits import SharedLimits
from runner.engine.executors.limits_socket import LimitsClient
from runner.engine.executors.worker import BlockWorker
from runner.errors import RunnerError
from runner.inputs import Item
from runner.llm.cache.store import open_caches
from runner.llm.client.limits import DailyBudget
from runner.pipeline.model import Pipeline
from runner.runs.request import RunOptions

STOP_CHECK_SECONDS = 0.2      # how soon a running block sees the driver's stop


@dataclass
class _Process:
    loop: asyncio.AbstractEventLoop
    worker: BlockWorker
    limits: LimitsClient
    stop: Event


_this: _Process | None = None


def start(pipeline: Pipeline, options: RunOptions, kind: str, cwd: str, limits_path: str, stop: Event,
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


def run_block(items: list[Item], concurrency: int) -> dict[str, Any]:
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
