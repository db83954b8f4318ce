"""Where a run's items execute: in this process (`local`, the default) or across a Ray
cluster (`ray`, runner/engine/executors/ray_driver.py, imported only when asked for).

Either way the driver reads the input, and writes every output file, as a local run does;
an executor only turns items into results, handed to `on_result` as they finish."""

from __future__ import annotations

from collections.abc import Iterable

from runner.engine.context import Runtime
from runner.engine.executors.choice import EXECUTORS, ExecutorChoice, OnResult
from runner.inputs import Item

__all__ = ["EXECUTORS", "ExecutorChoice", "OnResult", "execute"]


async def execute(choice: ExecutorChoice, runtime: Runtime, items: Iterable[Item], concurrency: int,
                  on_result: OnResult) -> int:
    """Run every item with the chosen executor; the number of items run."""
    if choice.name == "ray":
        from runner.engine.executors.ray_driver import run_on_ray
        return await run_on_ray(choice, runtime, items, concurrency, on_result)
    from runner.engine.execute import run_items
    return await run_items(runtime, items, concurrency, on_result)
