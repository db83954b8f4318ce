"""The Python API behind the CLI: validate, run and render pipelines."""

from __future__ import annotations

import asyncio
import signal
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .context import RunOptions, Runtime, render_at
from .engine import run_item, run_items
from .errors import InputError, NeedsModel
from .fileio import atomic_write, dumps
from .inputs import Item, Record, make_items, read_records, record_from_pairs
from .json_cache import check_caches
from .loader import load_pipeline
from .outputs.files import ResultsLog
from .outputs.folder import OutputFolder
from .outputs.report import render_html, render_report
from .outputs.summary import summarize
from .pipeline import Pipeline
from .tracing import make_observer

# litellm builds its request coroutine in a worker thread; when Ctrl-C or SIGTERM cancels
# the call meanwhile, that coroutine is dropped unawaited and Python prints a warning
# that says nothing useful to a user who asked the run to stop.
warnings.filterwarnings("ignore", message=r"coroutine '\w+\.acompletion' was never awaited", category=RuntimeWarning)


@dataclass
class RunOutcome:
    pipeline: Pipeline
    out_dir: Path
    results: list[dict[str, Any]]
    summary: dict[str, Any]
    interrupted: bool = False
    terminated: bool = False       # by SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM ended the run; handled like Ctrl-C (what finished is written), exit 143."""

    exit_code = 143


@dataclass
class ItemSource:
    input_path: Path | None = None
    records: list[str] = field(default_factory=list)
    limit: int | None = None


def load_items(pipeline: Pipeline, source: ItemSource) -> list[Item]:
    if source.records and source.input_path:
        raise InputError("give either --input or --record, not both")
    if source.records:
        items = [Item(1, record_from_pairs(source.records))]
    elif source.input_path:
        spec = pipeline.input
        records: list[Record] = read_records(spec.get("adapter", "json"), source.input_path, spec.get("with") or {})
        items = make_items(records, spec.get("explode"))
    else:
        raise InputError("no input: give --input PATH or --record KEY=VALUE")
    return items[:source.limit] if source.limit else items


def default_out_dir(pipeline: Pipeline, source: ItemSource) -> Path:
    stem = source.input_path.stem if source.input_path else "record"
    return Path("reports") / pipeline.name / stem


def run_pipeline(path: str | Path, source: ItemSource, options: RunOptions,
                 overrides: list[str] | None = None) -> RunOutcome:
    pipeline = load_pipeline(path, overrides)
    items = load_items(pipeline, source)
    options.input_path = str(source.input_path) if source.input_path else None
    out_dir = options.out_dir or default_out_dir(pipeline, source)
    options.out_dir = out_dir
    runtime = Runtime.create(pipeline, options)
    runtime.observer = make_observer(runtime)
    concurrency = int(render_at(runtime, pipeline.concurrency, ("concurrency",),
                                {"params": runtime.params, "env": runtime.env}))
    check_caches(pipeline, options.cache_dir)     # an unusable cache is one message, not an error per item
    outcome = RunOutcome(pipeline, out_dir, [], {})
    folder = OutputFolder(out_dir).claim()       # one run at a time per folder
    try:
        asyncio.run(_run(runtime, items, concurrency, outcome))   # Ctrl-C: outputs written, then re-raised
    except asyncio.CancelledError:
        if outcome.terminated:
            raise Terminated() from None
        raise
    finally:
        folder.release()
    return outcome


def _cancel_on_sigterm(outcome: RunOutcome) -> None:
    """SIGTERM cancels the run as Ctrl-C does, so what finished is written."""
    main = asyncio.current_task()

    def terminate() -> None:
        outcome.terminated = True
        if main is not None:
            main.cancel()
    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, terminate)
    except (ValueError, RuntimeError, NotImplementedError):   # not the main thread, or no signals here
        pass


async def _run(runtime: Runtime, items: list[Item], concurrency: int, outcome: RunOutcome) -> None:
    _cancel_on_sigterm(outcome)
    log = ResultsLog(outcome.out_dir / "results.jsonl")
    done: list[dict[str, Any]] = []
    outcome.results = done

    def keep(result: dict[str, Any]) -> None:
        done.append(result)
        log.append(result)

    try:
        outcome.results = await run_items(runtime, items, concurrency, keep)
    except asyncio.CancelledError:       # asyncio.run cancels the run on Ctrl-C
        outcome.interrupted = True
        raise
    finally:
        log.close()
        await runtime.aclose()
        _write_outputs(runtime, outcome, interrupted=outcome.interrupted)


def _write_outputs(runtime: Runtime, outcome: RunOutcome, interrupted: bool = False) -> None:
    results = sorted(outcome.results, key=lambda r: r.get("index", 0))
    outcome.results = results
    summary = summarize(runtime, results, interrupted=interrupted)
    if runtime.llm_used:
        summary.update(runtime.llm.summary(results))
    for name, section in runtime.summary_sections.items():
        summary[name] = section(runtime)
    if runtime.memo is not None:
        runtime.memo.save()
        summary["memo"] = {"store": str(runtime.memo.path), "reused": runtime.memo.hits,
                           "stored": runtime.memo.stored}
    outcome.summary = summary
    out = outcome.out_dir
    atomic_write(out / "results.jsonl", "".join(dumps(r) + "\n" for r in results))
    atomic_write(out / "summary.json", dumps(summary) + "\n")
    spec = runtime.pipeline.summary
    layout_args = (summary, results, spec.get("report_columns"), spec.get("assessment_key", "assessment"))
    atomic_write(out / "report.md", render_report(*layout_args))
    atomic_write(out / "report.html", render_html(*layout_args))


def render_pipeline(path: str | Path, source: ItemSource, options: RunOptions, stream: TextIO,
                    overrides: list[str] | None = None, item_number: int | None = None) -> dict[str, int]:
    """Print every prompt the LLM steps would send, in item order; send nothing."""
    pipeline = load_pipeline(path, overrides)
    items = load_items(pipeline, source)
    if item_number is not None:
        chosen = [i for i in items if i.index == item_number]
        if not chosen:
            raise InputError(f"--item {item_number}: the input has {len(items)} item(s)")
        items = chosen
    options.render = True
    options.input_path = str(source.input_path) if source.input_path else None
    runtime = Runtime.create(pipeline, options)
    runtime.render_stream = stream
    return asyncio.run(_render(runtime, items, stream))


async def _render(runtime: Runtime, items: list[Item], stream: TextIO) -> dict[str, int]:
    try:
        for item in items:
            stream.write(f"=== item {item.index} ===\n")
            try:
                result = await run_item(runtime, item)
                if result.get("error"):
                    stream.write(f"(item error: {result['error']})\n")
            except NeedsModel as stop:
                stream.write(f"(the rest of item {item.index} needs a model answer that is not cached: {stop})\n")
        stats = runtime.render_stats
        stream.write(f"LLM calls: {stats['calls']} ({stats['cached']} cached), "
                     f"est. prompt tokens: {stats['tokens']}\n")
        return stats
    finally:
        await runtime.aclose()
