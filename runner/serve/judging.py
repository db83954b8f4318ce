"""Judging for `runner serve`: one long-lived runtime per pipeline variant (a pipeline with a
request's params, by its hash), one LLM client per served pipeline shared by all its variants
and jobs (limits, capacity, breakers, the response cache), the results store in front of them,
and one computation per (pipeline, hash, item key) however many requests ask at once."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from runner.engine.context import RunRole, Runtime
from runner.engine.execute import run_item
from runner.engine.health import item_end
from runner.errors import RunnerError
from runner.inputs import Item, Record, iter_items
from runner.llm.shared_client import SharedClient
from runner.pipeline.model import Pipeline
from runner.runs.request import RunOptions
from runner.serve.http import ApiError
from runner.serve.job_files import JudgeRun, ResumeIndex, say
from runner.serve.served_pipelines import Catalog, Served, load_variant, request_overrides
from runner.stores.database import StoreUnavailable
from runner.stores.kept import ANSWERED_FIELD, VOTES_FIELD, answered_before, kept, noting, reusable, without_reads
from runner.stores.result_store import ResultStore, StoredResult
from runner.tracing import make_observer

MAX_VARIANTS = 32            # runtimes kept for request params; the least recently used idle one goes
MAX_KNOWN_PARAMS = 4096      # request params remembered with the hash they make
T = TypeVar("T")


@dataclass
class Settings:
    root: Path                          # the project folder (PIPELINES_DIR's parent): reports/ lives here
    cache_dir: Path
    concurrency: int = 8                # LLM requests in flight per served pipeline (--concurrency)
    concurrency_given: bool = False
    trace: str | None = None            # --trace mlflow|none
    max_items: int = 100                # items one judge request may hold
    transport: Any = None               # what sends the LLM calls (tests: an in-process model)


@dataclass
class Variant:
    """A served pipeline with a request's params: its hash keys the stored results."""

    served: Served
    pipeline: Pipeline
    overrides: list[str]        # what its pipeline was loaded with: the server's --set and --model, then params
    hash: str
    runtime: Runtime
    run: JudgeRun               # the run folder its runtime records /judge's items in
    busy: int = 0

    @property
    def name(self) -> str:
        return self.served.name


COUNTED = ("judged", "errors", "store", "cache")      # /judge's counts, each always given
Computed = tuple[dict[str, Any], str, bool]     # an item's result, its source, whether a model's answer made it


def stored_form(result: dict[str, Any]) -> dict[str, Any]:
    """A result as stored: without its position in one request or run."""
    return {name: value for name, value in result.items() if name not in ("index", "item_key")}


def _fresh(found: StoredResult | None) -> dict[str, Any] | None:
    """A stored result whose data files are as they were when judged (without their reads)."""
    return reusable(found.result) if found is not None else None


class SingleFlight(Generic[T]):
    """One computation per key however many ask at once: identical requests in flight make one set of LLM calls."""

    def __init__(self) -> None:
        self._running: dict[Hashable, asyncio.Task[T]] = {}

    async def run(self, key: Hashable, compute: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """The value, and whether another caller's computation gave it. The first caller owns the
        computation (cancelling it cancels the computation); a caller who joined it computes the
        value itself when the owner was cancelled."""
        while True:
            task = self._running.get(key)
            if task is None:
                task = asyncio.ensure_future(compute())
                self._running[key] = task
                task.add_done_callback(functools.partial(self._done, key))
                return await task, False
            try:
                return await asyncio.shield(task), True
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is None or current.cancelling():
                    raise
                self._done(key, task)         # the owner was cancelled: the next turn computes it here

    def _done(self, key: Hashable, task: asyncio.Task[T]) -> None:
        if self._running.get(key) is task and task.done():
            del self._running[key]

    def __len__(self) -> int:
        return len(self._running)


class Judging:
    def __init__(self, settings: Settings, catalog: Catalog, store: ResultStore):
        self.settings = settings
        self.catalog = catalog
        self.store = store
        self._clients: dict[str, SharedClient] = {}
        self._variants: OrderedDict[tuple[str, str], Variant] = OrderedDict()
        self._closing: set[asyncio.Task[None]] = set()      # evicted variants' runs, ending
        self._hashes: dict[tuple[str, int, str], str] = {}       # (name, catalog generation, params' sha256) -> hash
        # an item's Computed, for whoever joins the flight
        self._flights: SingleFlight[Computed] = SingleFlight()
        self._indexes = itertools.count(1)        # item numbers in the long-lived runtimes, never reused

    def client(self, name: str) -> SharedClient:
        """The LLM client every request and job of this pipeline shares."""
        if name not in self._clients:
            self._clients[name] = SharedClient.open(self.settings.cache_dir, self.settings.concurrency,
                                                    self.settings.transport, self.settings.concurrency_given)
        return self._clients[name]

    def options(self, **more: Any) -> RunOptions:
        return RunOptions(cache_dir=self.settings.cache_dir, llm_concurrency=self.settings.concurrency,
                          concurrency_given=self.settings.concurrency_given, trace=self.settings.trace, **more)

    async def variant(self, name: str, params: dict[str, Any] | None = None) -> Variant:
        """The runtime for this pipeline with these params (made on first use; ApiError for a
        param a request may not set, a value its schema refuses, or one that changes models)."""
        served = self.catalog.get(name)
        # by digest: a request's params may be megabytes, and up to MAX_KNOWN_PARAMS are remembered
        asked = hashlib.sha256(json.dumps(params or {}, sort_keys=True, default=str).encode()).hexdigest()
        known = self._hashes.get((name, self.catalog.generation, asked))
        if known is not None and (name, known) in self._variants:
            self._variants.move_to_end((name, known))
            return self._variants[(name, known)]
        # in a thread: loading and checking a pipeline with large params must not hold the event loop
        overrides = await asyncio.to_thread(request_overrides, served, params)
        pipeline = await asyncio.to_thread(load_variant, served, overrides, self.settings.cache_dir)
        runtime = Runtime.create(pipeline, self.options(), RunRole(shared_llm=self.client(name)))
        if overrides:
            base = await self.variant(name)
            if _models(runtime) != _models(base.runtime):
                raise ApiError(400, "params: these values change the pipeline's models, which a request may not")
        digest = runtime.made_by
        if len(self._hashes) >= MAX_KNOWN_PARAMS:     # requests with ever new params keep it bounded
            self._hashes.clear()
        self._hashes[(name, self.catalog.generation, asked)] = digest
        if (name, digest) in self._variants:       # the same content by other words (e.g. a default given)
            return self._variants[(name, digest)]
        runtime.observer = make_observer(runtime)
        made_with = [*served.overrides, *overrides]      # the server's --set and --model, then the request's
        variant = self._variants[(name, digest)] = Variant(served, pipeline, made_with, digest, runtime,
                                                           JudgeRun(self.settings.root, runtime, made_with))
        self._evict(keep=(name, digest))
        return variant

    def _evict(self, keep: tuple[str, str]) -> None:
        """The least recently used idle variants past MAX_VARIANTS (never `keep`, just made), closed
        in the background: their run's summary and reports are not written on a request's path."""
        while len(self._variants) > MAX_VARIANTS:
            idle = next((key for key, v in self._variants.items() if v.busy == 0 and key != keep), None)
            if idle is None:
                return
            closing = asyncio.create_task(self._variants.pop(idle).run.aclose())
            self._closing.add(closing)
            closing.add_done_callback(self._closed)

    def _closed(self, task: asyncio.Task[None]) -> None:
        self._closing.discard(task)
        if not task.cancelled() and (failed := task.exception()) is not None:
            say(f"closing a pipeline variant: {failed}")

    async def judge(self, variant: Variant, records: Iterable[Any]) -> list[dict[str, Any]]:
        """Each item of these records (exploded as the pipeline says), from the store or judged:
        its JudgedItem (source store, cache: every call answered from the LLM cache, judged or error)."""
        items = list(iter_items((Record(value) for value in records), variant.pipeline.input.explode,
                                variant.served.list_in_key))
        if len(items) > self.settings.max_items:
            raise ApiError(413, f"{len(items)} items in one request: at most {self.settings.max_items} "
                                "(send a job for more)")
        variant.busy += 1
        try:
            keys = [item.key for item in items]
            stored = await asyncio.to_thread(self.store.get_many, variant.name, variant.hash, keys)
            return list(await asyncio.gather(*(self._answer(variant, position, item, _fresh(stored.get(item.key)))
                                               for position, item in enumerate(items, start=1))))
        finally:
            variant.busy -= 1

    async def _answer(self, variant: Variant, position: int, item: Item,
                      stored: dict[str, Any] | None) -> dict[str, Any]:
        if stored is not None:
            result, source = stored, "store"
        else:
            numbered = Item(next(self._indexes), item.value, item.parent, item.error, item.exploded_from)
            try:
                result, source = await self.served_item(variant, variant.runtime, numbered, variant.run)
            finally:            # this request records the item: its LLM tally is settled, whatever happened
                item_end(variant.runtime, numbered.index, {})
        result = without_reads(stored_form(result))        # without the note a job's run counts
        return {"index": position, "item_key": item.key, "source": source, "pipeline_hash": variant.hash,
                "trace_id": result.get("mlflow_trace_id"), "result": result}

    async def served_item(self, variant: Variant, runtime: Runtime, item: Item,
                          run: JudgeRun | None = None) -> tuple[dict[str, Any], str]:
        """(result, source) of one item: the stored one, else computed once however many ask (by a
        request's variant, recorded in its `run`; by a job's runtime, which skips an unreachable store)."""
        async def compute() -> Computed:
            try:
                stored = await asyncio.to_thread(self.store.get, variant.name, variant.hash, item.key)
            except StoreUnavailable:
                if run is not None:
                    raise
                stored = None
            with noting() as notes:
                fresh = _fresh(stored)
            if fresh is not None and stored is not None:        # with its juries' votes, as a computed result
                return {**fresh, **({VOTES_FIELD: notes.votes} if notes.votes else {})}, "store", \
                    answered_before(stored.result)
            return await self._compute(variant, runtime, item, run)
        (result, source, answered), joined = await self._flights.run((variant.name, variant.hash, item.key), compute)
        if joined and source == "error":        # an error counts in the run that made it: this item runs in its own
            (result, source, answered), joined = await self._compute(variant, runtime, item, run), False
        if joined or source == "store":        # this item's own number, first as in any result
            result = {"index": item.index, "item_key": item.key, **stored_form(result)}
            if answered:        # made by a model's answer, not this run's: counted as the cache's (ErrorCount.add)
                result[ANSWERED_FIELD] = True
        return result, source

    async def _compute(self, variant: Variant, runtime: Runtime, item: Item,
                       run: JudgeRun | None) -> Computed:
        """(result, source, whether a model's answer made it: its calls', or the memo entry's)."""
        if run is not None:
            run.open()
        with noting() as notes:
            result = await run_item(runtime, item)
        end = item_end(runtime, item.index, result, keep=True)      # its run's recorder settles it
        source = "error" if end.error else "cache" if end.cached else "judged"
        answered = end.answered or answered_before(result)
        try:
            if source != "error":           # stored first: a paid result is kept whatever its run folder does
                try:
                    await asyncio.to_thread(self.store.put, variant.name, variant.hash, item.key,
                                            kept(without_reads(stored_form(result)), notes, answered=answered))
                except StoreUnavailable as exc:
                    if run is not None:
                        raise
                    say(f"{exc}: a job's result is kept in its run only")
        finally:
            if run is not None:
                run.keep(item.index, result)
        return result, source, answered

    def job_role(self, variant: Variant, resumed: ResumeIndex | None, counts: dict[str, int]) -> RunRole:
        """A job's run: the pipeline's shared LLM client; each item from its earlier run
        (`resumed`, whose calls are written first into the fresh calls.jsonl), else the store, else
        computed; `counts` tallies where each came from (resumed, store, memo, judged) or errors."""
        to_write = [resumed] if resumed is not None else []

        async def run_one(runtime: Runtime, item: Item) -> dict[str, Any]:
            while to_write:         # the first item, before any call of this run's
                for lines in to_write.pop().kept_calls():
                    runtime.llm.add_calls(lines)
                if runtime.llm_used:
                    runtime.llm.flush()
            earlier = resumed.get(item.key) if resumed is not None else None
            if earlier is not None:
                counts["resumed"] += 1
                return {**earlier, "index": item.index}
            result, source = await self.served_item(variant, runtime, item)
            counts["errors" if source == "error" else
                   "memo" if result.get("memo_hit") else "store" if source == "store" else "judged"] += 1
            return result
        return RunRole(shared_llm=self.client(variant.name), item_runner=run_one)

    async def aclose(self) -> None:
        """Every variant's run ended, the evicted ones' awaited; one that fails to close keeps nothing else open."""
        variants, self._variants = list(self._variants.values()), OrderedDict()
        closing = [variant.run.aclose() for variant in variants] + list(self._closing)
        for failed in await asyncio.gather(*closing, return_exceptions=True):
            if isinstance(failed, BaseException):
                say(f"closing a pipeline variant: {failed}")
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()


def _models(runtime: Runtime) -> list[tuple[str, Any]]:
    """Each model as it resolves (an unresolvable one by its error), to compare two variants'."""
    resolved: list[tuple[str, Any]] = []
    for name in runtime.pipeline.models:
        try:
            resolved.append((name, runtime.model_spec(name)))
        except RunnerError as exc:
            resolved.append((name, str(exc)))
    return resolved
