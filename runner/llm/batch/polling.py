"""Following one submitted batch: the pauses between its polls, polling it until it ends, its
output and error files, and a batch another run may still be creating.

A failure answers as the provider did (TransportError); a 404 (GONE) means the provider no
longer has the batch or its file, which the collector treats as a batch that is gone."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from runner.llm.batch.calls import Tracked
from runner.llm.batch.client import BatchClient
from runner.llm.batch.lines import batch_problem
from runner.llm.batch.store import TERMINAL, BatchStore
from runner.llm.client.transport import TransportError

FIRST_POLL = 2.0          # seconds before a batch is first polled (a small batch may be done by then)
POLL_GROWTH = 2.0         # each pause twice the last, up to batch_poll_seconds
POLL_FAILURES = 10        # failed polls in a row before the waiting calls are failed (the batch stays on disk)
GONE = 404                # what a provider answers for a batch or file it no longer has


def poll_pauses(longest: float) -> Iterator[float]:
    """The pauses between a batch's polls: FIRST_POLL seconds, then each POLL_GROWTH times the
    last, none longer than `longest` (a model's batch_poll_seconds)."""
    pause = min(FIRST_POLL, longest)
    while True:
        yield pause
        pause = min(pause * POLL_GROWTH, longest)


async def until_done(client: BatchClient, store: BatchStore, tracked: Tracked, batch: dict[str, Any]) -> dict[str, Any]:
    """Poll the batch until it ends (each new state kept in `tracked` and the store); its last
    state. A failed poll is tried again, up to POLL_FAILURES in a row; one not worth trying
    again (a 404 among them) is raised."""
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


async def files_of(client: BatchClient, batch: dict[str, Any]) -> list[bytes]:
    """The batch's output and error files, those it has."""
    return [await client.content(str(batch[name])) for name in ("output_file_id", "error_file_id")
            if batch.get(name)]


async def created(client: BatchClient, store: BatchStore, tracked: Tracked) -> dict[str, Any] | None:
    """A batch another run submitted: its provider id once that run wrote it down (it may be
    creating the batch right now: waited for while it runs), else the batch found at the
    provider by its submission id (its run died before writing the id); None when there is
    none (never created, or its run gave the submission up)."""
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
