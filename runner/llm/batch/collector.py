"""Calls answered through a provider's batch API (OpenAI's /v1/files and /v1/batches).

Items run until they wait on a batched call; a model's waiting calls are gathered and
submitted as one batch file when every running item waits (the engine counts them, see
runner/llm/in_flight.py), when `batch_max_requests` calls wait, or when the first has waited
`batch_max_wait` seconds. Each batch is polled (`batch_poll_seconds`, growing), its output
and error files read, and every waiting call resumed with its own line; a call's cache
key is its line's custom_id. Submissions are on disk (store.py) before anyone
polls them: a restarted run finds a call's batch by that key and polls it again."""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runner.llm.batch.calls import BatchCall, Gathered, ModelBatches, Requeue, Tracked
from runner.llm.batch.client import BatchClient
from runner.llm.batch.lines import (
    RequestLine,
    batch_problem,
    chunks,
    line_outcome,
    quietly,
    read_lines,
    unsupported,
    wire_model,
)
from runner.llm.batch.store import TERMINAL, BatchRecord, BatchStore
from runner.llm.client.prices import batch_price_of
from runner.llm.client.sender import ModelStats, _count
from runner.llm.client.spec import ModelSpec
from runner.llm.client.structured import FormatChoices, brief, rejects_format, response_format
from runner.llm.client.transport import Completion, TransportError
from runner.llm.in_flight import ItemsInFlight
from runner.retry import RetryAfterTooLong, retry_delay

SETTLE_TURNS = 8          # loop turns for woken tasks (a jury's other seats, the next item) to reach their waits
POLL_GROWTH = 1.5
POLL_CAP = 8              # the pause between polls grows to 8x batch_poll_seconds
POLL_FAILURES = 10        # failed polls in a row before the waiting calls are failed (the batch stays on disk)
Outcome = Completion | TransportError
LiveSend = Callable[..., Awaitable[tuple[Completion, str]]]


class BatchCollector:
    def __init__(self, cache_dir: Path, formats: FormatChoices, stats: dict[str, ModelStats], live: LiveSend,
                 in_flight: ItemsInFlight | None = None):
        self.cache_dir = cache_dir
        self.formats = formats
        self.stats = stats
        self.live = live
        self.in_flight = in_flight
        self.models: dict[str, ModelBatches] = {}
        self._specs: dict[str, ModelSpec] = {}
        self._store: BatchStore | None = None
        self._clients: dict[str, BatchClient] = {}
        self._gathered: dict[str, Gathered] = {}
        self._tracked: dict[str, Tracked] = {}
        self._in_batches: dict[str, Tracked] = {}
        self._ours: set[str] = set()            # submissions made by this run
        self._waiting: dict[int, int] = {}
        self._changed: asyncio.Event | None = None
        self._dispatcher: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        if in_flight is not None:
            in_flight.listen(self._wake)

    @property
    def store(self) -> BatchStore:
        if self._store is None:
            self._store = BatchStore(self.cache_dir)
        return self._store

    # -- one call ------------------------------------------------------------------------
    async def send(self, call: BatchCall, mode: str, stats: ModelStats) -> tuple[Completion, str]:
        """The completion and the structured-output mode it was asked with; an error line
        is retried per the model's policy (the next batch, or live), then raised."""
        spec = self._specs[call.spec.name] = call.spec
        attempt = 0
        while True:
            mode = self.formats.settled(spec, mode)
            with self._waiting_item(call.item):
                outcome = await self._answer(call, mode)
            if isinstance(outcome, Completion):
                _count(stats, outcome)
                outcome.attempts = attempt + 1
                return outcome, mode
            error = outcome
            if call.schema is not None and rejects_format(error):
                following = self.formats.fall_back(spec, mode, error)
                if following is None:
                    raise TransportError(error.kind, f"{brief(error)} (the server rejects response_format {mode}: "
                                                     f"set models.{spec.name}.structured_output to auto or another "
                                                     f"mode)", error.status)
                mode = following
                continue
            if not error.retryable or attempt >= spec.retries:
                failure = TransportError(error.kind, error.message, error.status, body=error.body)
                failure.attempts = attempt + 1
                raise failure
            try:
                delay = retry_delay(attempt, spec.backoff, error.retry_after)
            except RetryAfterTooLong as too_long:       # said by a refused submission: not worth a later batch
                failure = TransportError(error.kind, f"{error.message} ({too_long})", error.status)
                failure.attempts = attempt + 1
                raise failure from None
            attempt += 1
            stats.retries += 1
            await asyncio.sleep(delay)      # the model's backoff: a refused submission (429) is not sent straight back
            if spec.batch_retry == "live":
                self._model(spec).live_retries += 1
                return await self.live(spec, call.messages, call.sampling, call.schema, mode, stats)

    @contextmanager
    def _waiting_item(self, item: int) -> Iterator[None]:
        self._waiting[item] = self._waiting.get(item, 0) + 1
        self._wake()
        try:
            yield
        finally:
            left = self._waiting[item] - 1
            if left:
                self._waiting[item] = left
            else:
                del self._waiting[item]

    async def _answer(self, call: BatchCall, mode: str) -> Outcome:
        spec = call.spec
        while True:
            key = call.key(mode)
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            gathered = self._gathered.setdefault(spec.name, Gathered())
            if key in gathered.lines:
                gathered.waiters[key].append(future)            # the same request from another item
            elif key in self._in_batches:
                self._in_batches[key].waiters.setdefault(key, []).append(future)
            elif (record := self._stored(key, spec)) is not None:
                self._adopt(record, spec, key, future)
            else:
                body = {**spec.extra, **call.sampling, "model": wire_model(spec.model), "messages": call.messages}
                wanted = response_format(mode, call.schema)
                if wanted is not None:
                    body["response_format"] = wanted
                gathered.lines[key] = RequestLine(key, body)
                gathered.waiters[key] = [future]
                gathered.since = gathered.since or time.monotonic()
            self._start()
            outcome = await future
            if not isinstance(outcome, Requeue):
                return outcome

    def _stored(self, key: str, spec: ModelSpec) -> BatchRecord | None:
        return self.store.holding(key, spec.api_base, spec.model)

    def _adopt(self, record: BatchRecord, spec: ModelSpec, key: str, future: asyncio.Future[Any]) -> None:
        tracked = self._tracked.get(record.submission)
        if tracked is None:
            tracked = self._tracked[record.submission] = Tracked(record.submission, spec, {}, record.batch_id,
                                                                 record.status)
            self._model(spec).resumed += 1
            self._spawn(self._resume(tracked), tracked)
        tracked.waiters.setdefault(key, []).append(future)
        self._in_batches[key] = tracked

    # -- gathering and submitting ----------------------------------------------------------
    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()

    def _start(self) -> None:
        if self._dispatcher is None:
            self._changed = asyncio.Event()
            self._dispatcher = asyncio.ensure_future(self._dispatch())
        self._wake()

    async def _dispatch(self) -> None:
        assert self._changed is not None
        while True:
            deadlines = [g.since + self._specs[name].batch_max_wait for name, g in self._gathered.items() if g.lines]
            timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            try:
                await asyncio.wait_for(self._changed.wait(), timeout)
            except TimeoutError:
                pass
            self._changed.clear()
            for _ in range(SETTLE_TURNS):
                await asyncio.sleep(0)
            try:
                self._submit_due()
            except Exception as exc:    # the calls gathered so far fail; the dispatcher goes on for the next
                self._fail_gathered(TransportError("other", f"batch handling failed: {type(exc).__name__}: {exc}"))

    def _fail_gathered(self, error: TransportError) -> None:
        gathered, self._gathered = self._gathered, {}
        for waiting in gathered.values():
            for futures in waiting.waiters.values():
                for future in futures:
                    if not future.done():
                        future.set_result(error)

    def _submit_due(self) -> None:
        everyone_waits = len(self._waiting) >= (self.in_flight.count if self.in_flight else 0)
        now = time.monotonic()
        for name, gathered in list(self._gathered.items()):
            if not gathered.lines:
                continue
            spec = self._specs[name]
            if everyone_waits or len(gathered.lines) >= spec.batch_max_requests \
                    or now - gathered.since >= spec.batch_max_wait:
                self._gathered[name] = Gathered()
                for ids, data in chunks(list(gathered.lines.values()), spec.batch_max_requests):
                    # Tracked at once: the same call from another item joins this batch, never a second one.
                    submission = uuid.uuid4().hex
                    self._ours.add(submission)
                    tracked = self._tracked[submission] = Tracked(submission, spec,
                                                                  {key: gathered.waiters[key] for key in ids})
                    for key in ids:
                        self._in_batches[key] = tracked
                    self._spawn(self._submit(tracked, ids, data), tracked)

    async def _submit(self, tracked: Tracked, ids: list[str], data: bytes) -> None:
        spec, submission = tracked.spec, tracked.submission
        self.store.intend(submission, spec.name, spec.model, spec.api_base, ids)
        self.stats.setdefault(spec.name, ModelStats()).calls += len(ids)
        client = self._client(spec)
        try:
            file_id = await client.upload(data)
            batch = await client.create(file_id, submission)
        except TransportError as exc:
            found = None if exc.kind == "client" else await quietly(client.find(submission))
            if found is None:
                self.store.forget(submission)
                self._finish(tracked, {}, unsupported(exc), collected=False)
                return
            batch = found
        self._model(spec).batches += 1
        self._model(spec).requests += len(ids)
        self.store.submitted(submission, str(batch["id"]), str(batch.get("status") or "validating"))
        await self._poll(tracked, batch)

    async def _resume(self, tracked: Tracked) -> None:
        client = self._client(tracked.spec)
        try:
            if tracked.batch_id is None:
                batch = await client.find(tracked.submission)
                if batch is None:       # killed before the batch was created: nothing to poll, nothing paid
                    self.store.forget(tracked.submission)
                    self._finish(tracked, {}, Requeue(), collected=False)
                    return
                self.store.submitted(tracked.submission, str(batch["id"]), str(batch.get("status")))
            else:
                batch = await client.retrieve(tracked.batch_id)
        except TransportError as exc:
            self._finish(tracked, {}, exc, collected=False)
            return
        if tracked.submission not in self._ours:
            sys.stderr.write(f"runner: polling batch {batch['id']} of model {tracked.spec.name}, submitted by an "
                             f"earlier run\n")
        await self._poll(tracked, batch)

    # -- polling and answers -----------------------------------------------------------------
    async def _poll(self, tracked: Tracked, batch: dict[str, Any]) -> None:
        spec, client = tracked.spec, self._client(tracked.spec)
        tracked.batch_id = str(batch["id"])
        delay, failures = spec.batch_poll_seconds, 0
        while True:
            self._note(tracked, batch)
            if tracked.status in TERMINAL:
                break
            await asyncio.sleep(delay)
            delay = min(delay * POLL_GROWTH, spec.batch_poll_seconds * POLL_CAP)
            try:
                batch = await client.retrieve(tracked.batch_id)
                failures = 0
            except TransportError as exc:
                failures += 1
                if exc.retryable and failures < POLL_FAILURES:
                    continue
                self._finish(tracked, {}, exc, collected=False)     # still on disk: a retry polls it again
                return
        outcomes: dict[str, Outcome] = {}
        for name in ("output_file_id", "error_file_id"):
            if batch.get(name):
                try:
                    data = await client.content(str(batch[name]))
                except TransportError as exc:
                    self._finish(tracked, {}, exc, collected=False)
                    return
                outcomes.update((line["custom_id"], line_outcome(line, spec)) for line in read_lines(data))
        self._finish(tracked, outcomes, self._missing(tracked, batch))

    def _note(self, tracked: Tracked, batch: dict[str, Any]) -> None:
        status = str(batch.get("status") or "unknown")
        counts = {k: int(v) for k, v in (batch.get("request_counts") or {}).items() if isinstance(v, int)}
        if status != tracked.status or counts != tracked.counts:
            tracked.status, tracked.counts = status, counts
            self.store.update(tracked.submission, status, counts, batch_problem(batch))

    def _missing(self, tracked: Tracked, batch: dict[str, Any]) -> TransportError:
        """What a call gets when the batch's files hold no line for it."""
        status = tracked.status
        if status == "completed":
            return TransportError("server", f"batch {tracked.batch_id} completed without a line for this call")
        message = batch_problem(batch) or "no reason given"
        said = f"batch {tracked.batch_id} of model {tracked.spec.name} {status}: {message}"
        self._model(tracked.spec).problems.append(said)
        sys.stderr.write(f"runner: {said}\n")
        # An expired batch is retried; one the provider refused or someone cancelled fails its calls.
        return TransportError("server" if status == "expired" else "client", said)

    def _finish(self, tracked: Tracked, outcomes: dict[str, Outcome], missing: Outcome | Requeue,
                collected: bool = True) -> None:
        self._tracked.pop(tracked.submission, None)
        if collected:
            self.store.collected(tracked.submission)
        for key, futures in tracked.waiters.items():
            if self._in_batches.get(key) is tracked:
                del self._in_batches[key]
            outcome = outcomes.get(key, missing)
            for future in futures:
                if not future.done():
                    future.set_result(outcome)

    # -- plumbing ----------------------------------------------------------------------
    def _model(self, spec: ModelSpec) -> ModelBatches:
        return self.models.setdefault(spec.name, ModelBatches())

    def _client(self, spec: ModelSpec) -> BatchClient:
        if spec.endpoint not in self._clients:
            self._clients[spec.endpoint] = BatchClient(spec)
        return self._clients[spec.endpoint]

    def _spawn(self, work: Awaitable[None], tracked: Tracked) -> None:
        """Run a batch's submission or polling; should it break, its calls fail rather than wait forever."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            self._tasks.discard(finished)
            problem = None if finished.cancelled() else finished.exception()
            if problem is not None:
                self._finish(tracked, {}, TransportError("other", f"batch handling failed: "
                                                                  f"{type(problem).__name__}: {problem}"),
                             collected=False)
        task.add_done_callback(done)

    def progress(self) -> str:
        """Each batch's state and counts (read by the progress thread: copies only)."""
        parts = []
        for tracked in list(self._tracked.values()):
            counts = dict(tracked.counts)
            done = counts.get("completed", 0) + counts.get("failed", 0)
            parts.append(f"{tracked.spec.name} {tracked.status} {done}/{counts.get('total') or len(tracked.waiters)}")
        gathering = sum(len(g.lines) for g in list(self._gathered.values()))
        if gathering:
            parts.append(f"{gathering} call(s) gathering")
        return f"batches: {', '.join(parts)}" if parts else ""

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, model in self.models.items():
            spec = self._specs.get(name)
            price = batch_price_of(spec.model) if spec else None
            basis = ("no price in litellm's table" if price is None else "batch price from litellm's table"
                     if price[1] else "estimate: 50% of the live price")
            out[name] = {**{k: v for k, v in vars(model).items() if v or k in ("batches", "requests")},
                         "cost_basis": basis}
        return out

    async def aclose(self) -> None:
        for task in [*self._tasks, *([self._dispatcher] if self._dispatcher else [])]:
            task.cancel()
        await asyncio.gather(*self._tasks, *([self._dispatcher] if self._dispatcher else []), return_exceptions=True)
        for client in self._clients.values():
            await client.aclose()
        if self._store is not None:
            self._store.close()
