"""The Python API behind the CLI: validate, run and render pipelines."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .context import RunOptions, Runtime, render_at
from .engine import run_item, run_items
from .errors import InputError, NeedsModel
from .fileio import atomic_write, dumps
from .inputs import Item, Record, make_items, read_records, record_from_pairs
from .loader import load_pipeline
from .outputs.files import ResultsLog
from .outputs.report import render_html, render_report
from .outputs.summary import summarize
from .pipeline import Pipeline


@dataclass
class RunOutcome:
    pipeline: Pipeline
    out_dir: Path
    results: list[dict[str, Any]]
    summary: dict[str, Any]
    interrupted: bool = False


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
    concurrency = int(render_at(runtime, pipeline.concurrency, ("concurrency",),
                                {"params": runtime.params, "env": runtime.env}))
    outcome = RunOutcome(pipeline, out_dir, [], {})
    asyncio.run(_run(runtime, items, concurrency, outcome))   # Ctrl-C: outputs written, then re-raised
    return outcome


async def _run(runtime: Runtime, items: list[Item], concurrency: int, outcome: RunOutcome) -> None:
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
