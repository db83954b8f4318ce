"""Runs items through steps: `if`, `on_error`, stop, concurrency, outputs."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from runner.checks.result_shapes import ShapeContext, as_result, empty_value, laid_over, skipped_value, step_shape
from runner.engine.context import CallCounts, Runtime, StepContext, StepsOutcome, add_warning, condition_at, render_at
from runner.engine.health import item_end
from runner.engine.juror_verdicts import FIELD as JURORS_FIELD
from runner.engine.juror_verdicts import juror_verdicts
from runner.engine.steps.base import Step, step_class
from runner.errors import InputError, NeedsModel, RunnerError, StepError, TemplateError
from runner.inputs import Item
from runner.pipeline.model import StepSpec
from runner.redact import redact
from runner.runs.folders import is_item_number
from runner.safetext import UnwritableValue, clean_value, writable_value
from runner.stores.kept import ANSWERED_FIELD, NOTES, VOTES_FIELD, Notes, answered_before, kept, noting, reusable
from runner.templating.sandbox import Result, ResultList

if TYPE_CHECKING:
    from runner.stores.memo import MemoStore

__all__ = ["Runtime", "StepContext", "StepsOutcome", "condition_at", "render_at", "run_item",
           "run_items", "run_steps"]


WINDOW_AHEAD = 8      # how many windows' worth of items may finish past the oldest running one


@functools.cache
def _instance(uses: str) -> Step:
    """One instance per step type, shared by every run of this process."""
    return step_class(uses)()


_Shape = tuple[dict[str, Any], dict[str, Any]]      # a step's result shape: as declared, and as its on_error makes it


class _Shapes:
    """Each step's result shape (as declared, and with its on_error and default), once per step
    and run, as `runner validate` checks reads against (runner/checks/result_shapes.py): what a
    step reads as with no result of its own, so a later template reads its fields unguarded.
    Skipped (its `if:` was false): its empty value with `skipped` true; failed into its
    `default:`: that default laid over its empty value."""

    def __init__(self, runtime: Runtime):
        self.context = ShapeContext(runtime.pipeline.schemas_dir, self._substeps)
        self.known: dict[Any, _Shape] = {}

    def _substeps(self, steps: list[Any]) -> dict[str, Any]:
        return {s["id"]: self._of(s["uses"], s.get("with") or {}, s.get("on_error"), s.get("default"))[1]
                for s in steps if isinstance(s, dict) and isinstance(s.get("id"), str) and "uses" in s}

    def _of(self, uses: str, args: Mapping[str, Any], on_error: Any, default: Any) -> _Shape:
        result_schema = step_class(uses).result_schema
        return result_schema(args, self.context), step_shape(result_schema, args, on_error, default, self.context)

    def of(self, spec: StepSpec) -> _Shape:
        if spec.path not in self.known:
            self.known[spec.path] = self._of(spec.uses, spec.args, spec.on_error, spec.default)
        return self.known[spec.path]


async def run_steps(runtime: Runtime, specs: tuple[StepSpec, ...], scope: dict[str, Any],
                    counts: CallCounts | None = None, *, item: Item) -> StepsOutcome:
    """Run `specs` in order in `scope` (whose `steps` dict they fill); `counts`: the calls of the
    step around them, which theirs add to."""
    results: dict[str, Any] = scope["steps"]
    for spec in specs:  # a step the item never reaches (after a stop or a failure) is null
        results.setdefault(spec.id, None)
    outcome = StepsOutcome(results)
    for spec in specs:
        try:
            if spec.condition is not None and not condition_at(runtime, spec.condition, (*spec.path, "if"), scope):
                results[spec.id] = skipped_value(runtime.resource(_Shapes).of(spec)[1])
                continue
        except TemplateError as exc:
            outcome.error = str(exc)
            return outcome
        ctx: StepContext | None = None
        span, failure = runtime.observer.step_start(item, spec), None
        step = _instance(spec.uses)
        try:
            lazy = set(step.lazy_fields) | ({"steps"} if step.substeps else set())
            args = {k: (v if k in lazy or not step.render_args
                        else render_at(runtime, v, (*spec.path, "with", k), scope))
                    for k, v in spec.args.items()}
            ctx = StepContext(runtime, spec, args, scope, item, functools.partial(run_steps, runtime, item=item),
                              counts=CallCounts(parent=counts))
            results[spec.id] = as_result(await step.run(ctx))
            if item.rewrites:
                results[spec.id] = _rewritten(item, spec.id, results[spec.id], outcome)
        except (StepError, TemplateError) as exc:
            message = failure = exc.message if isinstance(exc, StepError) else str(exc)
            partial = exc.partial if isinstance(exc, StepError) else None
            if spec.on_error == "fail":
                results[spec.id] = as_result(partial)
                outcome.error = f"step '{spec.id}': {message}"
                return outcome
            outcome.warnings.append(f"step '{spec.id}': {message}")
            if spec.on_error == "continue":
                results[spec.id] = as_result({**(partial or {}), "error": message})
            else:
                try:
                    default = render_at(runtime, spec.default, (*spec.path, "default"), {**scope, "error": message})
                    results[spec.id] = as_result(laid_over(empty_value(runtime.resource(_Shapes).of(spec)[0]), default))
                except TemplateError as again:
                    outcome.error = str(again)
                    return outcome
        finally:
            if ctx is not None and step.counts_calls:
                _tell_counts(results.get(spec.id), ctx.counts)
            runtime.observer.step_end(span, results.get(spec.id), failure)
        if ctx is not None and ctx.stop_requested:
            outcome.stopped = True
            return outcome
    return outcome


def _tell_counts(result: Any, counts: CallCounts) -> None:
    """A step's LLM calls in its result: fields of a mapping, attributes of a list."""
    if isinstance(result, Result):
        result["calls"], result["attempts"] = counts.calls, counts.attempts
    elif isinstance(result, ResultList):
        result.calls, result.attempts = counts.calls, counts.attempts


def _rewritten(item: Item, step_id: str, result: Any, outcome: StepsOutcome) -> Any:
    """A probe copy's step result as its perturbations of that step make it (runner/text/perturb.py)."""
    for rewrite in item.rewrites:
        if rewrite.step == step_id:
            result, unchanged = rewrite.apply(result)
            if unchanged:
                outcome.warnings.append(unchanged)
    return result


async def run_item(runtime: Runtime, item: Item) -> dict[str, Any]:
    """One item's result: its output fields, `index`, and `error` when there is one; its juries'
    votes (its own, or those of the result it reused) go with it as a note (kept.VOTES_FIELD),
    which the run's recorder adds to its juror agreement and takes off."""
    with noting() as notes:
        result = await _run_item(runtime, item, notes)
    if notes.votes:
        result[VOTES_FIELD] = notes.votes
    return result


async def _run_item(runtime: Runtime, item: Item, notes: Notes) -> dict[str, Any]:
    result: dict[str, Any] = {"index": item.index, "item_key": item.key}
    if item.error:
        result["error"] = item.error
        return clean_value(result)
    try:
        scope = runtime.base_scope(item)
    except InputError as exc:           # a record not of the shape input.namespaces says
        return {**result, "error": str(exc)}
    memo, memo_key = runtime.memo, None
    if memo is not None and runtime.pipeline.memo is not None:
        try:
            memo_key = str(render_at(runtime, runtime.pipeline.memo.key, ("memo", "key"), scope))
            # --no-cache reads no stored result either; what it computes is stored as usual.
            # Reused only when this pipeline made it (params, prompts, schemas, models) from these data files.
            stored = None if runtime.options.no_cache else memo.get(
                memo_key, functools.partial(reusable, made_by=runtime.made_by))
            if stored is not None:
                return await _memo_hit(runtime, item, stored, scope, result)
            if memo.unreadable:
                add_warning(runtime, f"memo store {memo.path}: a stored result is not readable (not a JSON "
                                     "object): taken as not stored, its item computed again")
        except TemplateError as exc:
            return {**result, "error": str(exc)}
    started = time.perf_counter()
    runtime.observer.item_start(item)
    calls = CallCounts()
    try:
        outcome = await run_steps(runtime, runtime.pipeline.steps, scope, calls, item=item)
    except NeedsModel:
        raise
    except RunnerError as exc:
        outcome = StepsOutcome(scope["steps"], error=str(exc))
    except Exception as exc:  # a bug in one step must not sink the other items
        outcome = StepsOutcome(scope["steps"], error=f"internal error: {type(exc).__name__}: {exc}")
    scope["duration_ms"] = round((time.perf_counter() - started) * 1000)
    scope["llm_calls"] = calls.calls
    if runtime.pipeline.output_base:
        try:
            base = render_at(runtime, runtime.pipeline.output_base, ("output_base",), scope)
            # a record's own `error`, `warnings` (and names a kept result's notes take) are kept as input_<name>
            if isinstance(base, dict):
                result.update({f"input_{k}" if k in ("error", "warnings", *NOTES) else k: v for k, v in base.items()
                               if k not in ("index", "item_key")})
        except TemplateError as exc:
            outcome.error = outcome.error or str(exc)
    for name, template in runtime.pipeline.output.items():
        try:
            result[name] = render_at(runtime, template, ("output", name), scope)
        except TemplateError as exc:
            result[name] = None
            outcome.error = outcome.error or str(exc)
    if not is_item_number(result.get("index")):
        # The results are ordered, matched and reported by their index: one that is not an
        # item number is this item's error, and the item keeps its own number.
        outcome.error = outcome.error or (f"output.index: {str(result['index'])[:80]!r} is not an item number (an "
                                          "output named index replaces the item's number: name it otherwise)")
        result["index"] = item.index
    if runtime.role.kind == "probe" and not outcome.error:
        juries = await juror_verdicts(runtime, item, scope, run_steps)
        if juries:
            result[JURORS_FIELD] = juries
    if outcome.error:
        # A failed item keeps what it could compute; fields that came out empty are dropped.
        result = {k: v for k, v in result.items() if v is not None}
        result["error"] = redact(outcome.error)
    elif result.get("error") is None:
        result.pop("error", None)      # `error` is present only when there is one
    given = result.pop("warnings", None)
    warnings = [*(given if isinstance(given, list) else [] if given is None else [given]), *outcome.warnings]
    if warnings:
        result["warnings"] = [redact(w) if isinstance(w, str) else w for w in warnings]
    try:      # one encoding for every output it reaches (runner/safetext.py)
        result = writable_value(result)
    except UnwritableValue:
        result = _without_unwritable(result, outcome)
    await runtime.observer.item_end(item, result)
    if memo is not None and memo_key is not None and not outcome.error:
        _remember(runtime, memo, memo_key, result, scope, notes, item.index)
    return result


def _without_unwritable(result: dict[str, Any], outcome: StepsOutcome) -> dict[str, Any]:
    """`result` without the fields JSON cannot hold (a plugin's result that holds itself, NaN);
    the item's error names the first unless it has one already."""
    kept: dict[str, Any] = {}
    for name, value in result.items():
        try:
            kept[name] = writable_value(value)
        except UnwritableValue as exc:
            outcome.error = outcome.error or f"output.{name}: not JSON-serialisable: {exc}"
    kept["error"] = kept.get("error") or redact(str(outcome.error))
    return kept


def _remember(runtime: Runtime, memo: MemoStore, key: str, result: dict[str, Any], scope: dict[str, Any],
              notes: Notes, position: int) -> None:
    """Store a finished result unless `memo.skip_when` says not to (a broken condition stores nothing)
    or its LLM work got no usable answer, noting whether a model answered it (its LLM tally, read
    and kept for the run's count)."""
    skip = runtime.pipeline.memo.skip_when if runtime.pipeline.memo else None
    try:
        if skip and condition_at(runtime, skip, ("memo", "skip_when"), {**scope, "result": result}):
            return
    except TemplateError as exc:
        result.setdefault("warnings", []).append(f"{exc}; result not stored")
        return
    end = item_end(runtime, position, result, keep=True) if runtime.llm_used else None
    if end is not None and end.error:       # LLM work with no usable answer (on_error let it pass): an error
        return                              # to its run, never a result a rerun takes as judged
    memo.put(key, kept(result, notes, runtime.made_by, end is not None and end.answered))


async def _memo_hit(runtime: Runtime, item: Item, stored: dict[str, Any], scope: dict[str, Any],
                    result: dict[str, Any]) -> dict[str, Any]:
    """A stored result with the fields of `memo.refresh` rendered for this item (which keeps its
    own index and warnings, whatever a store file says), traced as one item marked `memo_hit`, and
    noted when a model's answer made it (the run counts it). It keeps the ids of the trace that
    judged it (feedback belongs there): the new trace's fields only fill gaps."""
    runtime.observer.item_start(item)
    result.update({k: v for k, v in stored.items() if k not in ("index", "warnings", ANSWERED_FIELD)})
    try:
        for name in runtime.pipeline.memo.refresh if runtime.pipeline.memo else ():
            result[name] = render_at(runtime, runtime.pipeline.output[name], ("output", name), scope)
        result["memo_hit"] = True
        reused = clean_value(result)
    except TemplateError as exc:
        reused = {**result, "error": str(exc)}
    traced = dict(reused)
    await runtime.observer.item_end(item, traced)
    for name, value in traced.items():
        reused.setdefault(name, value)
    if answered_before(stored):        # the run counts it as the cache's answer (outputs/summary.ErrorCount)
        reused[ANSWERED_FIELD] = True
    return reused


async def run_items(runtime: Runtime, items: Iterable[Item], concurrency: int,
                    on_result: Callable[[int, dict[str, Any]], Awaitable[None] | None]) -> int:
    """Run every item (through the role's `item_runner` if any), at most `concurrency` at once,
    handing each one's input position and result to `on_result`; the number of items run.
    Items are taken only as the window has room, so neither the input nor the results are ever
    all in memory; a finished item is at most WINDOW_AHEAD windows past the oldest running one,
    which keeps results.jsonl nearly in input order."""
    limit = max(1, concurrency)
    ahead = limit * WINDOW_AHEAD
    running: dict[asyncio.Task[None], int] = {}
    source = iter(items)
    position = 0

    async def one(item: Item) -> None:
        with runtime.in_flight.item():      # a batch collector reads how many items are running
            result = await (runtime.role.item_runner or run_item)(runtime, item)
        maybe = on_result(item.index, result)
        if maybe is not None:
            await maybe

    # Finished tasks arrive here (asyncio.wait would add and remove a callback on every
    # running task each time one finishes).
    done: asyncio.Queue[asyncio.Task[None]] = asyncio.Queue()
    try:
        exhausted = False
        while True:
            oldest = min(running.values(), default=position)
            while not exhausted and len(running) < limit and position - oldest < ahead:
                item = next(source, None)
                if item is None:
                    exhausted = True
                    break
                task = asyncio.ensure_future(one(item))
                task.add_done_callback(done.put_nowait)
                running[task] = position
                position += 1
                # Let the items started so far reach their first await (an LLM call on its way)
                # before the next one's own work: a wide window filled at once would keep the
                # first request back until every item had started.
                await asyncio.sleep(0)
            if not running:
                break
            finished_now = [await done.get()]
            while not done.empty():
                finished_now.append(done.get_nowait())
            for task in finished_now:
                del running[task]
                task.result()           # a bug in on_result ends the run
    finally:
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
    return position                     # every item started has finished
