"""The driver of `--executor processes` and `--executor ray`, and the worker each of them
runs: items go in blocks to a pool of workers, IN_FLIGHT_PER_WORKER blocks per worker at a
time, so memory holds a bounded number of items whatever the input's size. Where a block runs
is a BlockRunner's business (processes.py, ray_blocks.py); the rest is done here for both.

A worker (BlockWorker) is the engine of a local run, built once, run over one block at a time.
A block's answer is its results (with their juries' votes) and what the summary adds up (LLM
counts and call logs, run warnings, memo counts), each taken per block by subtraction, so a
block run again after its worker was lost counts once. The driver adds them to its own as if it
had run the block: it is the one writer of every output."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import os
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sized
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from runner.engine.context import RunRole, Runtime, add_warning, run_warnings
from runner.engine.execute import run_items
from runner.engine.executors.choice import OnResult
from runner.engine.executors.limits import SharedLimits
from runner.inputs import Item
from runner.llm.cache.store import JsonCache
from runner.llm.tally import absorb_report, take_report
from runner.pipeline.model import Pipeline
from runner.runs.request import RunOptions

BLOCKS_PER_WORKER = 4          # blocks a worker gets over a run: a lost one costs little, each is worth sending
MAX_BLOCK = 1000               # items in one block at most
IN_FLIGHT_PER_WORKER = 2       # the next block is there when one ends
STOP_CHECK_SECONDS = 0.2       # how soon a running block sees that its run stopped


@dataclass(frozen=True)
class BlockRunner:
    """Where blocks run: `run(worker, block, concurrency)`, worker 0 .. workers - 1, is one block's
    answer (BlockWorker.run_block), or RunnerError when it was lost; `stop()`, where there is
    one, ends every running block with the answer of what it finished."""

    workers: int
    run: Callable[[int, list[Item], int], Awaitable[dict[str, Any]]]
    stop: Callable[[], None] | None = None


def absolute(options: RunOptions) -> RunOptions:
    """The run's options with every folder absolute: a worker may start elsewhere."""
    return replace(options, cache_dir=Path(options.cache_dir).resolve(),
                   out_dir=Path(options.out_dir).resolve() if options.out_dir else None,
                   memo_dir=Path(options.memo_dir).resolve() if options.memo_dir else None)


def _blocks(items: Iterable[Item], size: int) -> Iterator[list[Item]]:
    source = iter(items)
    while block := list(itertools.islice(source, size)):
        yield block


async def run_blocks(runner: BlockRunner, runtime: Runtime, items: Iterable[Item], concurrency: int,
                     on_result: OnResult) -> int:
    """Run every item in blocks on the runner's workers; the number of items run."""
    total = len(items) if isinstance(items, Sized) else MAX_BLOCK * runner.workers
    blocks = _blocks(items, max(1, min(MAX_BLOCK, math.ceil(total / (runner.workers * BLOCKS_PER_WORKER)))))
    running: dict[asyncio.Future[dict[str, Any]], int] = {}      # a block: its worker

    def send(worker: int) -> None:
        block = next(blocks, None)
        if block is not None:
            running[asyncio.ensure_future(runner.run(worker, block, concurrency))] = worker

    finished = 0
    try:
        for worker in range(runner.workers):
            for _ in range(IN_FLIGHT_PER_WORKER):
                send(worker)
        while running:
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                worker = running.pop(future)
                answer = future.result()
                absorb(runtime, answer)
                finished += await hand_on(answer, on_result)
                send(worker)
    except BaseException:               # Ctrl-C or a failure: the blocks still running end now
        await _end(runner, runtime, list(running), on_result)
        raise
    return finished


async def _end(runner: BlockRunner, runtime: Runtime, running: list[asyncio.Future[dict[str, Any]]],
               on_result: OnResult) -> None:
    """Stop the running blocks: where the runner can, each answers the items it finished, whose
    counts are all taken in, then whose results are handed on as any block's (a failure to hand
    one on, a full disk, ends that: the run's own error is the one raised); else they are cancelled."""
    if runner.stop is None or not running:
        for future in running:
            future.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        return
    runner.stop()
    answers = [answer for answer in await asyncio.gather(*running, return_exceptions=True)
               if isinstance(answer, dict)]
    for answer in answers:
        absorb(runtime, answer)
    with contextlib.suppress(Exception):
        for answer in answers:
            await hand_on(answer, on_result)


async def hand_on(answer: dict[str, Any], on_result: OnResult) -> int:
    """Each result of a block's answer to `on_result`, in its order; how many."""
    for position, result in zip(answer["positions"], answer["results"], strict=True):
        maybe = on_result(position, result)
        if maybe is not None:
            await maybe
    return len(answer["results"])


def absorb(runtime: Runtime, answer: dict[str, Any]) -> None:
    """A block's counts, added to the driver's as if it had run the block itself."""
    if answer["llm"] is not None:
        absorb_report(runtime.llm, answer["llm"])
    for warning in answer["warnings"]:
        add_warning(runtime, warning)
    if runtime.memo is not None:
        runtime.memo.hits += answer["memo"][0]
        runtime.memo.stored += answer["memo"][1]


class BlockWorker:
    """Where a block runs, in a worker process or a Ray actor."""

    def __init__(self, pipeline: Pipeline, options: RunOptions, kind: str, cwd: str | Path,
                 caches: dict[str, JsonCache], limits: SharedLimits, stopped: Callable[[], bool]) -> None:
        """`kind`: the driver's run's (RunRole.kind); `caches`: the run's caches as this worker
        reaches them; `limits`: the models' limits, held for every worker of the run at once;
        `stopped()`: whether the run stopped."""
        os.chdir(cwd)           # relative paths (inputs, sources, params) resolve as on the driver
        self.runtime = Runtime.create(pipeline, options, RunRole(kind, worker=True))
        self.runtime.open_caches = caches
        self.runtime.shared_limits = limits
        self.stopped = stopped

    async def run_block(self, items: list[Item], concurrency: int) -> dict[str, Any]:
        """The block's answer; once the run stopped, that of the items finished by then (the
        others' work in flight is dropped, as a local run's is at Ctrl-C)."""
        runtime, stopped = self.runtime, self.stopped
        finished: list[tuple[int, dict[str, Any]]] = []
        if stopped():
            items = []                  # a block still queued when its run stopped: nothing is started
        running = asyncio.ensure_future(run_items(runtime, items, concurrency,
                                                  lambda position, result: finished.append((position, result))))
        while not running.done():
            await asyncio.wait([running], timeout=STOP_CHECK_SECONDS)
            if stopped() and not running.done():
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)
        if not running.cancelled():
            await running               # a failure of the block's own is raised here
        positions = [position for position, _ in finished]
        memo, reused = runtime.memo, (0, 0)
        if memo is not None:            # taken by subtraction, as the LLM counts (llm/tally.py)
            reused = (memo.hits, memo.stored)
            memo.hits -= reused[0]
            memo.stored -= reused[1]
        return {"results": [result for _, result in finished], "positions": positions,
                "llm": take_report(runtime.llm, positions) if runtime.llm_used else None,
                "warnings": run_warnings(runtime),
                "memo": reused}

    async def close(self) -> None:
        await self.runtime.aclose()
