"""Where a run's items execute: in this process (`local`, the default), in worker processes
on this machine (`processes`, processes.py), or across a Ray cluster (`ray`, ray_blocks.py,
imported only when asked for).

Either of the last two sends blocks of items through one driver (driver.py), which reads
the input and writes every output file as a local run does; an executor only turns items
into results, handed to `on_result` as they finish."""

from __future__ import annotations

from collections.abc import Iterable

from runner.engine.context import Runtime
from runner.engine.executors.choice import EXECUTORS, ExecutorChoice, OnResult
from runner.inputs import Item

__all__ = ["EXECUTORS", "ExecutorChoice", "OnResult", "execute"]


async def execute(choice: ExecutorChoice, runtime: Runtime, items: Iterable[Item], concurrency: int,
                  on_result: OnResult) -> int:
    """Run every item with the chosen executor; the number of items run."""
    if choice.name == "local":
        from runner.engine.execute import run_items
        return await run_items(runtime, items, concurrency, on_result)
    from runner.engine.executors.driver import run_blocks
    if choice.name == "ray":
        from runner.engine.executors.ray_blocks import on_ray as start
    else:
        from runner.engine.executors.processes import on_processes as start
    async with start(choice, runtime) as runner:
        return await run_blocks(runner, runtime, items, concurrency, on_result)
