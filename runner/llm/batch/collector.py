"""Calls answered through a provider's batch API (OpenAI's /v1/files and /v1/batches).

Items run until they wait on a batched call; a model's waiting calls are gathered and
submitted as one batch file when every running item waits (the engine counts them, see
runner/engine/observe.py), when `batch_max_requests` calls wait, or when the first has waited
`batch_max_wait` seconds. Each batch is polled (`poll_pauses`: soon, then less and less
often, up to `batch_poll_seconds`), its output and error files read, and every waiting call
resumed with its own line; a call's cache key is its line's custom_id. An error line is
retried in the model's next batch, after the model's backoff: the retries of one round go
out together. Submissions are on disk (store.py) before anyone polls them: a restarted run,
or another run at the same time, finds a call's batch by that key and polls it rather than
paying twice. A batch the provider answers 404 for is gone: forgotten, and its calls sent again."""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from runner.engine.observe import ItemsInFlight
from runner.llm.batch.client import BatchClient, Outcome, RequestLine, answers, batch_problem, chunks, unsupported
from runner.llm.batch.polling import GONE, BatchCall, Gathered, ModelBatches, Requeue, Tracked, created, until_done
from runner.llm.batch.store import BatchRecord, BatchStore
from runner.llm.client.http import wire_model
from runner.llm.client.sender import ModelStats, retry_pause
from runner.llm.client.spec import ModelSpec
from runner.llm.client.structured import FormatChoices, response_format
from runner.llm.client.transport import Completion, TransportError

SETTLE_TURNS = 8          # loop turns for woken tasks (a jury's other seats, the next item) to reach their waits
LiveSend = Callable[..., Awaitable[tuple[Completion, str]]]


def broken(exc: BaseException) -> TransportError:
    """The failure of calls whose batch handling broke: they fail rather than wait forever."""
    return TransportError("other", f"batch handling failed: {type(exc).__name__}: {exc}")


def _resolve(futures: list[asyncio.Future[Any]], outcome: Outcome | Requeue) -> None:
    for future in futures:
        if not future.done():
            future.set_result(outcome)


class BatchCollector:
    def __init__(self, cache_dir: Path, formats: FormatChoices, stats: dict[str, ModelStats], live: LiveSend,
                 in_flight: ItemsInFlight | None = None, breakers: dict[str, str] | None = None):
        self.cache_dir = cache_dir
        self.breakers = {} if breakers is None else breakers   # the live sender's: a refused upload opens it too
        self.formats = formats
        self.stats = stats
        self.live = live
        self.in_flight = in_flight
        self.models: dict[str, ModelBatches] = {}
        self._specs: dict[str, ModelSpec] = {}
        self._clients: dict[str, BatchClient] = {}
        self._gathered: dict[str, Gathered] = {}
        self._tracked: dict[str, Tracked] = {}
        self._in_batches: dict[str, Tracked] = {}
        self._ours: set[str] = set()            # submissions made by this run
        self._not_before: dict[str, float] = {}  # a model's next batch waits until then (its retries' backoff)
        self._waiting: Counter[int] = Counter()    # item: its calls waiting on a batch
        self._changed: asyncio.Event | None = None
        self._dispatcher: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        if in_flight is not None:
            in_flight.listen(self._wake)

    @functools.cached_property
    def store(self) -> BatchStore:
        return BatchStore(self.cache_dir)

    # -- one call ------------------------------------------------------------------------
    async def send(self, call: BatchCall, mode: str, stats: ModelStats) -> tuple[Completion, str]:
        """The completion and the structured-output mode it was asked with; an error line
        is retried per the model's policy (the next batch, or live), then raised."""
        spec = self._specs[call.spec.name] = call.spec
        attempt = 0
        while True:
            mode = self.formats.settled(spec, mode, call.schema)
            self._waiting[call.item] += 1
            self._wake()
            try:
                outcome = await self._answer(call, mode)
            finally:
                self._waiting[call.item] -= 1
                if not self._waiting[call.item]:
                    del self._waiting[call.item]
            if isinstance(outcome, Completion):
                stats.add_usage(outcome)
                outcome.attempts = attempt + 1
                return outcome, mode
            error = outcome
            if (following := self.formats.fall_back(spec, mode, error, call.schema)) is not None:
                mode, attempt = following, 0            # asked anew, as a live call is
                continue
            if not error.retryable or attempt >= spec.retries:
                raise TransportError(error.kind, error.message, error.status, body=error.body, attempts=attempt + 1)
            delay = retry_pause(spec, attempt, error)       # a refused submission's long Retry-After: given up
            attempt += 1
            stats.retries += 1
            if spec.batch_retry == "live":
                await asyncio.sleep(delay)
                self._model(spec).live_retries += 1
                return await self.live(spec, call.messages, call.sampling, call.schema, mode, stats)
            # Gathered again at once, with the round's other failed calls; the model's next batch
            # waits out the backoff (a refused submission, 429, is not sent straight back).
            self._not_before[spec.name] = max(self._not_before.get(spec.name, 0.0), time.monotonic() + delay)

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
            elif (record := self.store.holding(key, spec.api_base, spec.model)) is not None:
                self._adopt(record, spec, key, [future])
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

    def _adopt(self, record: BatchRecord, spec: ModelSpec, key: str, futures: list[asyncio.Future[Any]]) -> None:
        """Wait on a batch another run submitted (or is submitting) for this call."""
        tracked = self._tracked.get(record.submission)
        if tracked is None:
            tracked = self._tracked[record.submission] = Tracked(record.submission, spec, {}, record.batch_id,
                                                                 record.status)
            self._spawn(self._resume(tracked), tracked)
        tracked.waiters.setdefault(key, []).extend(futures)
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
            now = time.monotonic()
            deadlines = [held if (held := self._not_before.get(name, 0.0)) > now
                         else g.since + self._specs[name].batch_max_wait
                         for name, g in self._gathered.items() if g.lines]
            timeout = max(0.0, min(deadlines) - now) if deadlines else None
            with suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout)
            self._changed.clear()
            for _ in range(SETTLE_TURNS):
                await asyncio.sleep(0)
            try:
                self._submit_due()
            except Exception as exc:    # the calls gathered so far fail; the dispatcher goes on for the next
                gathered, self._gathered = self._gathered, {}
                for waiting in gathered.values():
                    for futures in waiting.waiters.values():
                        _resolve(futures, broken(exc))

    def _submit_due(self) -> None:
        everyone_waits = len(self._waiting) >= (self.in_flight.count if self.in_flight else 0)
        now = time.monotonic()
        for name, gathered in list(self._gathered.items()):
            if not gathered.lines or now < self._not_before.get(name, 0.0):
                continue
            spec = self._specs[name]
            if everyone_waits or len(gathered.lines) >= spec.batch_max_requests \
                    or now - gathered.since >= spec.batch_max_wait:
                self._gathered[name] = Gathered()
                for ids, data in chunks(list(gathered.lines.values()), spec.batch_max_requests):
                    self._claim(spec, gathered, ids, data)

    def _claim(self, spec: ModelSpec, gathered: Gathered, ids: list[str], data: bytes) -> None:
        """Submit these gathered calls as one batch, but for those another run submitted since
        they were gathered (found in the same transaction that claims the rest): adopted."""
        submission = uuid.uuid4().hex
        try:
            held = self.store.claim(submission, spec.name, spec.model, spec.api_base, ids)
        except sqlite3.Error as exc:        # these calls fail rather than wait forever
            for key in ids:
                _resolve(gathered.waiters[key], broken(exc))
            return
        for key, record in held.items():
            self._adopt(record, spec, key, gathered.waiters[key])
        if held:
            ids = [key for key in ids if key not in held]
            data = b"".join(gathered.lines[key].encoded() for key in ids)
        if not ids:
            return
        # Tracked at once: the same call from another item joins this batch, never a second one.
        self._ours.add(submission)
        tracked = self._tracked[submission] = Tracked(submission, spec, {key: gathered.waiters[key] for key in ids})
        for key in ids:
            self._in_batches[key] = tracked
        self._spawn(self._submit(tracked, ids, data), tracked)

    async def _submit(self, tracked: Tracked, ids: list[str], data: bytes) -> None:
        spec, submission = tracked.spec, tracked.submission
        client = self._client(spec)
        try:
            file_id = await client.upload(data)
            batch = await client.create(file_id, submission)
        except TransportError as exc:
            found = None
            if exc.kind != "client":
                with suppress(TransportError):
                    found = await client.find(submission)
            if found is None:
                if exc.opens_breaker:
                    self.breakers[spec.endpoint] = exc.message
                self.store.forget(submission)
                self._finish(tracked, {}, unsupported(exc), collected=False)
                return
            batch = found
        self.stats.setdefault(spec.name, ModelStats()).calls += len(ids)       # sent once the provider has the batch
        self._model(spec).batches += 1
        self._model(spec).requests += len(ids)
        self.store.submitted(submission, str(batch["id"]), str(batch.get("status") or "validating"))
        await self._poll(tracked, batch)

    async def _resume(self, tracked: Tracked) -> None:
        """Poll a batch another run submitted (see polling.created)."""
        client = self._client(tracked.spec)
        try:
            batch = await created(client, self.store, tracked)
            if batch is None:           # never created, or its run gave it up: nothing to poll, nothing paid
                self.store.forget(tracked.submission)
                self._finish(tracked, {}, Requeue(), collected=False)
                return
            if "status" not in batch:
                batch = await client.retrieve(str(batch["id"]))
            else:                       # found at the provider: its id written down at last
                self.store.submitted(tracked.submission, str(batch["id"]), str(batch.get("status")))
        except TransportError as exc:
            self._failed(tracked, exc)
            return
        sys.stderr.write(f"runner: polling batch {batch['id']} of model {tracked.spec.name}, submitted by another "
                         f"run\n")
        await self._poll(tracked, batch)

    def _failed(self, tracked: Tracked, exc: TransportError) -> None:
        """Its calls get the failure (the batch stays on disk: a retry polls it again). A 404: the
        batch is gone, forgotten and said; its calls go out again, or fail if this run submitted it
        (retried per the model's policy: a gateway that loses every batch is not sent them forever)."""
        if exc.status != GONE:
            self._finish(tracked, {}, exc, collected=False)
            return
        self.store.forget(tracked.submission)
        ours = tracked.submission in self._ours
        said = self._say(tracked, f" is gone at the provider (HTTP {GONE}): forgotten; its {len(tracked.waiters)} "
                                  "call(s) " + ("fail, or are retried per the model's retries" if ours
                                                else "go out again in a new batch"))
        self._finish(tracked, {}, TransportError("server", said, GONE) if ours else Requeue(), collected=False)

    # -- polling and answers -----------------------------------------------------------------
    async def _poll(self, tracked: Tracked, batch: dict[str, Any]) -> None:
        tracked.batch_id = str(batch["id"])
        client = self._client(tracked.spec)
        try:
            batch = await until_done(client, self.store, tracked, batch)
            files = await client.files(batch)
        except TransportError as exc:
            self._failed(tracked, exc)
            return
        outcomes, problem = answers(files, tracked.spec, tracked.batch_id)
        if problem:
            self._say(tracked, f": {problem}")
        self._finish(tracked, outcomes, self._missing(tracked, batch))

    def _missing(self, tracked: Tracked, batch: dict[str, Any]) -> TransportError:
        """What a call gets when the batch's files hold no line for it."""
        status = tracked.status
        if status == "completed":
            return TransportError("server", f"batch {tracked.batch_id} completed without a line for this call")
        said = self._say(tracked, f" {status}: {batch_problem(batch) or 'no reason given'}")
        # An expired batch is retried; one the provider refused or someone cancelled fails its calls.
        return TransportError("server" if status == "expired" else "client", said)

    def _say(self, tracked: Tracked, problem: str) -> str:
        """`batch ID of model NAME` and its problem, said once on stderr and kept for summary.json."""
        batch = tracked.batch_id or f"(submitted as {tracked.submission[:12]})"
        said = f"batch {batch} of model {tracked.spec.name}{problem}"
        self._model(tracked.spec).problems.append(said)
        sys.stderr.write(f"runner: {said}\n")
        return said

    def _finish(self, tracked: Tracked, outcomes: dict[str, Outcome], missing: Outcome | Requeue,
                collected: bool = True) -> None:
        self._tracked.pop(tracked.submission, None)
        if collected:
            self.store.collected(tracked.submission)
            if tracked.submission not in self._ours:
                model = self._model(tracked.spec)
                model.resumed += 1
                model.collected += sum(1 for key in tracked.waiters if key in outcomes)
        for key, futures in tracked.waiters.items():
            if self._in_batches.get(key) is tracked:
                del self._in_batches[key]
            _resolve(futures, outcomes.get(key, missing))

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
                self._finish(tracked, {}, broken(problem), collected=False)
        task.add_done_callback(done)

    def progress(self) -> str:
        """`batches: m in_progress 0/3, 2 call(s) gathering` (read by the progress thread: copies only)."""
        parts = []
        for batch in list(self._tracked.values()):
            counts = dict(batch.counts)
            done = counts.get("completed", 0) + counts.get("failed", 0)
            parts.append(f"{batch.spec.name} {batch.status} {done}/{counts.get('total') or len(batch.waiters)}")
        gathering = sum(len(g.lines) for g in list(self._gathered.values()))
        if gathering:
            parts.append(f"{gathering} call(s) gathering")
        return f"batches: {', '.join(parts)}" if parts else ""

    def summary(self) -> dict[str, Any]:
        return {name: model.summary(self._specs.get(name)) for name, model in self.models.items()}

    async def aclose(self) -> None:
        tasks = [*self._tasks, *([self._dispatcher] if self._dispatcher else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for client in self._clients.values():
            await client.aclose()
        if "store" in vars(self):          # opened
            self.store.close()
