"""The Python API behind the CLI: validate, run and render pipelines."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from runner.engine.context import TEMPLATE_FAILURES, RunRole, Runtime, add_warning, render_at
from runner.engine.execute import run_item
from runner.engine.executors import ExecutorChoice, execute
from runner.engine.health import check_before_run
from runner.engine.progress import CallCounts, Progress, Quiet
from runner.engine.rates import pass_check
from runner.engine.voting import add_votes
from runner.errors import InputError, NeedsModel, RunnerError, TemplateError
from runner.fileio import OutputError, atomic_write, dumps
from runner.inputs import Item, ItemStream
from runner.llm.batch.store import check_store
from runner.llm.cache.store import open_caches
from runner.outputs.report_html import render_html
from runner.outputs.report_md import render_report
from runner.outputs.report_view import RowChooser, item_label, view_of
from runner.outputs.summary import ErrorCount, SummaryTally
from runner.pipeline.loader import load_pipeline
from runner.pipeline.model import Pipeline
from runner.pipeline.validated import ValidatedPipelines
from runner.runs.folders import CALLS_FILE, group_name, is_run, mark_latest, new_run_dir
from runner.runs.lock import LOCK_FILE, OutputFolder, refuse_overwriting_sources
from runner.runs.manifest import model_entries, sha256_file
from runner.runs.reads import load_items, spool_stdin
from runner.runs.record import RunOutcome, RunRecord
from runner.runs.request import ItemSource, RunOptions
from runner.runs.results_file import ResultsLog, ResultsView, merge_parent, rewrite_in_order
from runner.tracing import make_observer

__all__ = ["ItemSource", "RunOptions", "RunOutcome", "RunRole", "StartedRun", "load_items", "render_pipeline",
           "run_pipeline", "run_pipeline_async", "spool_stdin"]

# litellm builds its request coroutine in a worker thread: one Ctrl-C or SIGTERM cancels meanwhile is
# dropped unawaited, and Python's warning about it says nothing useful to a user who asked the run to stop.
warnings.filterwarnings("ignore", message=r"coroutine '\w+\.acompletion' was never awaited", category=RuntimeWarning)


def default_group(pipeline: Pipeline, source: ItemSource) -> Path:
    """reports/<pipeline>/<group>/ (runner/runs/folders.py); standard input's by its content (`stdin-1f3a9c`)."""
    if source.stdin_copy is not None:
        return Path("reports") / pipeline.name / f"stdin-{sha256_file(source.stdin_copy)[:6]}"
    return Path("reports") / pipeline.name / group_name(source.input_path, source.records, pipeline.project_dir)


def run_pipeline(path: str | Path, source: ItemSource, options: RunOptions,
                 overrides: list[str] | None = None, progress: Progress | None = None,
                 formats: Sequence[str] = (), executor: ExecutorChoice | None = None,
                 role: RunRole | None = None) -> RunOutcome:
    """Run the pipeline over the source's items; write results, summary, reports and run.json.
    Ctrl-C or SIGTERM ends the run with what finished written (`outcome.interrupted`, `terminated`;
    `outcome.stop_if_interrupted()` stops a caller that needs the whole run)."""
    with contextlib.suppress(RuntimeError):     # none: asyncio.run makes one (checked before claiming the folder)
        asyncio.get_running_loop()
        raise RunnerError("run_pipeline runs its own event loop: on a running one (a notebook, a server) "
                          "await run_pipeline_async")
    callers = source.stdin_copy is not None       # standard input copied by the caller: it removes it
    try:
        run = StartedRun.start(path, source, options, overrides, formats, executor, role)
        return asyncio.run(_until_interrupted(run, progress or Quiet()))
    finally:
        if not callers:
            source.discard_stdin_copy()


async def _until_interrupted(run: StartedRun, progress: Progress) -> RunOutcome:
    """The run as asyncio.run's main task, which Ctrl-C (asyncio.run cancels it) or SIGTERM ends."""
    main = asyncio.current_task()

    def terminate() -> None:             # SIGTERM cancels the run as Ctrl-C does
        run.outcome.terminated = True
        if main is not None:
            main.cancel()
    with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):   # not the main thread, or no signals
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, terminate)
    try:
        return await run.run(progress)
    except asyncio.CancelledError:
        run.outcome.interrupted = True
        return run.outcome


async def run_pipeline_async(path: str | Path, source: ItemSource, options: RunOptions,
                             overrides: list[str] | None = None, progress: Progress | None = None,
                             role: RunRole | None = None) -> RunOutcome:
    """run_pipeline on the caller's event loop (a notebook, a server), local; cancelling the
    task interrupts the run. Signals are the caller's."""
    return await StartedRun.start(path, source, options, overrides, role=role).run(progress or Quiet())


@dataclass
class StartedRun:
    """A run from its checks to its claimed folder (`outcome.out_dir`, known before anything runs:
    serve's jobs show it), then `run` runs it and writes its end."""

    runtime: Runtime
    items: ItemStream
    concurrency: int
    outcome: RunOutcome
    executor: ExecutorChoice
    folder: OutputFolder
    group: Path | None

    @classmethod
    def start(cls, path: str | Path, source: ItemSource, options: RunOptions, overrides: list[str] | None = None,
              formats: Sequence[str] = (), executor: ExecutorChoice | None = None,
              role: RunRole | None = None) -> StartedRun:
        executor, role = executor or ExecutorChoice(), role or RunRole()
        executor.check()
        if executor.name != "local" and (role.shared_llm is not None or role.item_runner is not None
                                         or role.preview is not None):
            raise InputError(f"--executor {executor.name}: a shared LLM client, an item runner and a preview "
                             "live in this process, so such a run is local")
        pipeline = load_pipeline(path, overrides, validated=ValidatedPipelines(options.cache_dir))
        check_before_run(pipeline, options.fail_under)
        items = load_items(pipeline, source)
        record = RunRecord.plan(pipeline, source, options, list(overrides or []), items, list(formats),
                                {"executor": executor.name, "workers": executor.workers}, role.kind)
        # An unusable cache is one message, not an error per item.
        caches = open_caches(pipeline, options.cache_dir)
        group: Path | None = None                     # --out DIR writes exactly into DIR
        out_dir = options.out_dir
        # Batched calls wait for the others: every item must be able to reach its wait.
        batching = options.batch or any(entry.get("batch") not in (None, False, "false")
                                        for entry in pipeline.models.values() if isinstance(entry, dict))
        try:
            if batching:
                check_store(options.cache_dir)        # and an unusable batch store too
            if out_dir is None:
                group = options.group or default_group(pipeline, source)
                out_dir = new_run_dir(group)
            refuse_overwriting_sources(out_dir, source.input_path, record.parent)
            runtime = Runtime.create(pipeline, _run_options(options, source, out_dir, group), role)
            runtime.open_caches = caches              # the run closes them
            runtime.observer = make_observer(runtime)
            if source.input_items == 0 and not source.records:
                add_warning(runtime, "the input has no item: nothing was judged")
            concurrency = items_in_flight(runtime)
            if batching:
                concurrency = max(concurrency, BATCH_WINDOW)
            outcome = RunOutcome(pipeline, out_dir, [], {}, formats=list(formats), record=record)
            folder = OutputFolder(out_dir).claim()       # one run at a time per folder
        except BaseException:
            for cache in caches.values():
                cache.close()
            if group is not None and out_dir is not None:
                with contextlib.suppress(OSError):      # a run that never started leaves no folder
                    out_dir.rmdir()
            raise
        return cls(runtime, items, concurrency, outcome, executor, folder, group)

    async def discard(self) -> None:
        """Let the run go unrun: its caches and memo store closed, its folder released (removed if it made it)."""
        try:
            await self.runtime.aclose()
        finally:
            if self.runtime.memo is not None:
                self.runtime.memo.close()
            if self.group is None:
                self.folder.release()
            else:       # a folder this run made goes: its lock file first, while still held
                (self.outcome.out_dir / LOCK_FILE).unlink(missing_ok=True)
                self.folder.release()
                with contextlib.suppress(OSError):      # not empty, or already gone
                    self.outcome.out_dir.rmdir()

    async def run(self, progress: Progress) -> RunOutcome:
        """run.json, the items, the outputs; then run.json's end, the folder released, `latest` when complete."""
        failed = True
        try:
            self.outcome.record.begin(self.outcome.out_dir, explicit_out=self.group is None,
                              models=model_entries(self.runtime.model_spec, list(self.runtime.pipeline.models)))
            await _run(self.runtime, self.items, self.concurrency, self.outcome, progress, self.executor)
            failed = False
        finally:
            self.outcome.record.finish(self.outcome, failed)
            self.folder.release()
            if self.group is not None and is_run(self.outcome.out_dir):
                mark_latest(self.outcome.out_dir, self.outcome.summary)
        return self.outcome


def _run_options(options: RunOptions, source: ItemSource, out_dir: Path | None, group: Path | None) -> RunOptions:
    """A copy of the caller's options (one may make several runs) with what the run decided: its
    folder, where a relative memo store lives (the group's folder, if it made one), its input."""
    return replace(options, out_dir=out_dir, memo_dir=group or options.memo_dir,
                   input_path=str(source.input_path) if source.input_path else None)


BATCH_WINDOW = 50_000     # items that may wait on batches at once: a batch file takes 50,000 lines


def items_in_flight(runtime: Runtime) -> int:
    """Items run at once: the pipeline's `concurrency:` when it pins one (a run warning when
    below --concurrency), else as many as the LLM requests in flight (--concurrency)."""
    requests = runtime.options.llm_concurrency
    if runtime.pipeline.concurrency is None:
        return requests
    value = render_at(runtime, runtime.pipeline.concurrency, ("concurrency",),
                      {"params": runtime.params, "env": runtime.env})
    try:
        pinned = int(value)
    except (TypeError, ValueError, OverflowError):
        raise RunnerError(f"concurrency: {str(value)[:80]!r} is not a whole number") from None
    if pinned < 1:
        raise RunnerError(f"concurrency: {pinned}: items in flight are at least 1")
    if runtime.options.concurrency_given and pinned < requests:
        add_warning(runtime, f"the pipeline pins concurrency: {pinned} (items in flight), so --concurrency "
                             f"{requests} (LLM requests in flight) may not be reached; --set concurrency={requests} "
                             "runs as many items at once")
    return pinned


def call_counts(runtime: Runtime) -> CallCounts:
    """LLM calls so far (read by the progress display's thread: copies, never iterates live)."""
    if not runtime.llm_used:
        return CallCounts()
    stats = list(runtime.llm.stats.values())
    return CallCounts(sum(s.calls for s in stats), sum(s.cache_hits for s in stats), sum(s.failures for s in stats),
                      runtime.llm.progress_note())


async def _run(runtime: Runtime, items: ItemStream, concurrency: int, outcome: RunOutcome,
               progress: Progress, executor: ExecutorChoice) -> None:
    log = ResultsLog(outcome.out_dir / "results.jsonl")
    errors = ErrorCount(runtime)

    def keep(position: int, result: dict[str, Any]) -> None:
        log.append(result, errors.add(position, result))     # then dropped: the results live in results.jsonl
        progress.advance()

    total = 0 if isinstance(progress, Quiet) else len(items)      # a counting pass over the input, when shown
    progress.start(total, lambda: call_counts(runtime))
    unwritable: OutputError | None = None
    try:
        await execute(executor, runtime, items, concurrency, keep)
    except asyncio.CancelledError:       # asyncio.run cancels the run on Ctrl-C
        outcome.interrupted = True
        raise
    except OutputError as exc:
        unwritable = exc
        raise
    finally:
        progress.stop()
        log.close()
        await runtime.aclose()
        try:
            await write_outputs(runtime, outcome, errors, interrupted=outcome.interrupted)
        except OutputError:
            if unwritable is None:       # else the first failure (results.jsonl) is the one to report
                raise


async def write_outputs(runtime: Runtime, outcome: RunOutcome, errors: ErrorCount, interrupted: bool = False) -> None:
    """A run folder's summary.json, reports and exports, from its results.jsonl: every run's."""
    out = outcome.out_dir
    record = outcome.record
    rewrite_in_order(out / "results.jsonl")
    if record.parent is not None:     # a --failed-from rerun: a complete view
        taken = merge_parent(out / "results.jsonl", record.parent / "results.jsonl",
                             functools.partial(add_votes, runtime))
        errors.add_all(taken)
        runtime.reused_answered += taken.answered     # answers as the cache's (health.unanswered_calls)
    results = ResultsView(out / "results.jsonl")
    outcome.results = results
    spec = runtime.pipeline.summary
    scope = {"params": runtime.params, "env": runtime.env, "run": runtime.run_info}
    checked = pass_check(spec, runtime.renderer, scope, (*TEMPLATE_FAILURES, TemplateError))   # as the summary's rates
    rule = checked[0] if checked else None

    def passed(result: dict[str, Any]) -> bool:     # meets the pass rule (an item it is undefined on does not)
        return checked is None or checked[1](result) is True
    # One pass for the summary's counts and the report's rows (each a parse of every result): an
    # item passes as the summary's reading of the rate that is the pass rule (not one named pass_when) said.
    by_rate = rule is not None and spec.rates.get(rule.name) == rule.expression
    tally, chosen = SummaryTally(runtime, errors), RowChooser(spec.report_columns, spec.count_by)
    for result in results:
        said = tally.add(result)
        chosen.add(result, None if rule is None else said.get(rule.name, False) if by_rate else passed(result))
    summary = tally.summary(results, interrupted)
    summary.update(record.summary_fields(results))
    if runtime.llm_used:
        summary.update(runtime.llm.summary(results))
    for name, section in runtime.summary_sections.items():
        summary[name] = section(runtime)
    if runtime.memo is not None:
        runtime.memo.close()
        summary["memo"] = {"store": str(runtime.memo.path), "reused": runtime.memo.hits,
                           "stored": runtime.memo.stored}
    if reused := runtime.reused_answered:
        summary["reused_answered"] = reused      # answers as the cache's for "no model answered any call"
    outcome.summary = summary
    atomic_write(out / "summary.json", dumps(summary) + "\n")
    view = view_of(summary, chosen, spec.assessment_key, out / CALLS_FILE, reason_field=spec.reason_field)
    atomic_write(out / "report.md", render_report(view))
    atomic_write(out / "report.html", render_html(view))
    if outcome.formats:
        from runner.outputs.exports import write_exports  # csv and xml only for --format
        described = rule.describe() if rule else "no error"
        write_exports(out, outcome.formats, runtime.pipeline.name, results, passed, described, spec.count_by,
                      lambda r: item_label(r, spec.report_columns), csv_raw=runtime.options.csv_raw)


def render_pipeline(path: str | Path, source: ItemSource, options: RunOptions, stream: TextIO,
                    overrides: list[str] | None = None, item_number: int | None = None) -> dict[str, int]:
    """Print every prompt the LLM steps would send, item by item under its heading; send nothing
    (the engine's one entry, with the preview role: its transport prints each prompt)."""
    pipeline = load_pipeline(path, overrides, validated=ValidatedPipelines(options.cache_dir))
    if item_number is not None:          # the caller's source stays as given
        source = replace(source, selection=replace(source.selection, item=item_number))
    try:
        items = load_items(pipeline, source)
        from runner.render.sink import RenderSink
        preview = RenderSink(stream)            # the calls' transport: answers from the cache only
        role = RunRole(preview=preview, item_runner=functools.partial(_render_item, stream))
        group = None if options.no_cache else default_group(pipeline, source)     # where a run's memo store is
        asyncio.run(_render(Runtime.create(pipeline, _run_options(options, source, None, group), role), items))
        stream.writelines(line + "\n" for line in preview.estimate.closing_lines())
        return preview.stats
    finally:
        source.discard_stdin_copy()


async def _render(runtime: Runtime, items: ItemStream) -> None:
    try:
        await execute(ExecutorChoice(), runtime, items, 1, lambda position, result: None)
    finally:
        await runtime.aclose()


async def _render_item(stream: TextIO, runtime: Runtime, item: Item) -> dict[str, Any]:
    """One item under its heading; an answer the cache does not hold stops the item, not the render."""
    stream.write(f"=== item {item.index} ===\n")
    try:
        result = await run_item(runtime, item)
    except NeedsModel as stop:
        stream.write(f"(the rest of item {item.index} needs a model answer that is not cached: {stop})\n")
        return {"index": item.index, "error": str(stop)}
    if result.get("memo_hit"):
        stream.write(f"(item {item.index} from the memo store: no call)\n")
    elif result.get("error"):
        stream.write(f"(item error: {result['error']})\n")
    return result
