"""What a batch collector keeps: the calls it answers, the calls a model gathers before
they go out, the batches it tracks, and each model's figures for summary.json."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runner.llm.batch.lines import RequestLine
from runner.llm.client.prices import batch_price_of
from runner.llm.client.spec import ModelSpec


class Requeue:
    """A call's stored batch was never created, or the provider no longer has it: gather it again."""


@dataclass
class BatchCall:
    spec: ModelSpec
    item: int
    messages: list[dict[str, Any]]
    sampling: dict[str, Any]
    schema: dict[str, Any] | None
    key: Callable[[str], str]          # the call's cache key for a structured-output mode


@dataclass
class Gathered:
    """A model's calls waiting to be submitted."""

    lines: dict[str, RequestLine] = field(default_factory=dict)
    waiters: dict[str, list[asyncio.Future[Any]]] = field(default_factory=dict)
    since: float = 0.0


@dataclass
class Tracked:
    """A submitted (or, after a restart, adopted) batch and the calls waiting on it."""

    submission: str
    spec: ModelSpec
    waiters: dict[str, list[asyncio.Future[Any]]]
    batch_id: str | None = None
    status: str = "submitting"
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class ModelBatches:
    """A model's figures for summary.json: the batches this run submitted and their requests;
    the batches another run submitted whose answers this run collected, and those answers."""

    batches: int = 0
    requests: int = 0
    resumed: int = 0
    collected: int = 0
    live_retries: int = 0
    problems: list[str] = field(default_factory=list)

    def summary(self, spec: ModelSpec | None) -> dict[str, Any]:
        """The figures that are not zero (batches and requests always), and where the cost came from."""
        price = batch_price_of(spec.model) if spec else None
        basis = ("no price in litellm's table" if price is None else "batch price from litellm's table"
                 if price[1] else "estimate: 50% of the live price")
        return {**{k: v for k, v in vars(self).items() if v or k in ("batches", "requests")}, "cost_basis": basis}


def progress_line(tracked: list[Tracked], gathering: int) -> str:
    """`batches: m in_progress 0/3, 2 call(s) gathering`: each batch's state and counts."""
    parts = []
    for batch in tracked:
        counts = dict(batch.counts)
        done = counts.get("completed", 0) + counts.get("failed", 0)
        parts.append(f"{batch.spec.name} {batch.status} {done}/{counts.get('total') or len(batch.waiters)}")
    if gathering:
        parts.append(f"{gathering} call(s) gathering")
    return f"batches: {', '.join(parts)}" if parts else ""
