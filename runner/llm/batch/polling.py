"""What a batch collector keeps (the calls it answers, those a model gathers, the batches it
tracks, each model's figures for summary.json), and following one submitted batch: the pauses
between its polls, polling it until it ends, and a batch another run may still be creating.
A failed poll raises what the provider answered; a 404 (GONE): it no longer has the batch."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from runner.llm.batch.client import BatchClient, RequestLine, batch_problem
from runner.llm.batch.store import TERMINAL, BatchStore
from runner.llm.client.prices import batch_price_of
from runner.llm.client.spec import ModelSpec
from runner.llm.client.transport import TransportError

FIRST_POLL = 2.0          # seconds before a batch is first polled (a small batch may be done by then)
POLL_GROWTH = 2.0         # each pause twice the last, up to batch_poll_seconds
POLL_FAILURES = 10        # failed polls in a row before the waiting calls are failed (the batch stays on disk)
GONE = 404                # what a provider answers for a batch or file it no longer has


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


def poll_pauses(longest: float) -> Iterator[float]:
    """The pauses between a batch's polls: FIRST_POLL seconds, then each POLL_GROWTH times the
    last, none longer than `longest` (a model's batch_poll_seconds)."""
    pause = min(FIRST_POLL, longest)
    while True:
        yield pause
        pause = min(pause * POLL_GROWTH, longest)


async def until_done(client: BatchClient, store: BatchStore, tracked: Tracked, batch: dict[str, Any]) -> dict[str, Any]:
    """The batch's last state, polled until it ends (each new state kept in `tracked` and the store);
    a failed poll is tried again, up to POLL_FAILURES in a row, unless it is not worth it (a 404)."""
    pauses, failures = poll_pauses(tracked.spec.batch_poll_seconds), 0
    while True:
        note(store, tracked, batch)
        if tracked.status in TERMINAL:
            return batch
        await asyncio.sleep(next(pauses))
        try:
            batch = await client.retrieve(str(tracked.batch_id))
            failures = 0
        except TransportError as exc:
            failures += 1
            if exc.retryable and exc.status != GONE and failures < POLL_FAILURES:
                continue
            raise


def note(store: BatchStore, tracked: Tracked, batch: dict[str, Any]) -> None:
    status = str(batch.get("status") or "unknown")
    counts = {k: int(v) for k, v in (batch.get("request_counts") or {}).items() if isinstance(v, int)}
    if status != tracked.status or counts != tracked.counts:
        tracked.status, tracked.counts = status, counts
        store.update(tracked.submission, status, counts, batch_problem(batch))


async def created(client: BatchClient, store: BatchStore, tracked: Tracked) -> dict[str, Any] | None:
    """A batch another run submitted: its provider id once that run wrote it down (waited for while
    that run creates it), else the batch found at the provider by its submission id (its run died
    first); None when there is none (never created, or given up)."""
    pauses = poll_pauses(tracked.spec.batch_poll_seconds)
    while True:
        record = store.get(tracked.submission)
        if record is None:
            return None
        if record.batch_id is not None:
            return {"id": record.batch_id}
        if not store.being_created(record):
            return await client.find(tracked.submission)
        await asyncio.sleep(next(pauses))
