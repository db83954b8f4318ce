"""The executor a run asked for, checked before the run starts."""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from runner.errors import InputError

# Each finished item's input position (its Item.index, whatever its output calls `index`) and result.
OnResult = Callable[[int, dict[str, Any]], Awaitable[None] | None]
EXECUTORS = ("local", "processes", "ray")


@dataclass(frozen=True)
class ExecutorChoice:
    """`--executor local|processes|ray [--workers N] [--ray-address ADDRESS]`."""

    name: str = "local"
    ray_address: str | None = None
    workers: int | None = None          # None: one per CPU (of this machine, or of the Ray cluster)

    def check(self) -> None:
        if self.name not in EXECUTORS:
            raise InputError(f"--executor {self.name}: choose from {', '.join(EXECUTORS)}")
        if self.name == "local" and self.workers:
            raise InputError("--workers goes with --executor processes or --executor ray")
        if self.name != "ray" and self.ray_address:
            raise InputError("--ray-address goes with --executor ray")
        if self.name == "ray" and importlib.util.find_spec("ray") is None:
            raise InputError("--executor ray needs Ray, an optional extra: pip install 'runner[ray]'")
