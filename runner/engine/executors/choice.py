"""The executor a run asked for, checked before the run starts."""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from runner.errors import InputError

OnResult = Callable[[dict[str, Any]], Awaitable[None] | None]
EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class ExecutorChoice:
    """`--executor local|ray [--ray-address ADDRESS] [--workers N]`."""

    name: str = "local"
    ray_address: str | None = None
    workers: int | None = None          # Ray: None = one per CPU the cluster has

    def check(self) -> None:
        if self.name not in EXECUTORS:
            raise InputError(f"--executor {self.name}: choose from {', '.join(EXECUTORS)}")
        if self.name != "ray" and (self.ray_address or self.workers):
            raise InputError("--ray-address and --workers go with --executor ray")
        if self.name == "ray":
            if importlib.util.find_spec("ray") is None:
                raise InputError("--executor ray needs Ray, an optional extra: pip install 'runner[ray]'")


