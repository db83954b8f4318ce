"""`runner sweep`: every combination of a grid of `--set` values, replayed from the LLM cache.

Each setting is first run the way `runner render` runs (answers from the cache, nothing
sent); a setting whose prompts are all cached is complete after that one pass. A setting
that changes a prompt is reported with the calls it would make and is only run for real
with allow_calls.

A failed call is never cached, so the calls that failed in the latest run of the pipeline
over the same input are not taken for calls to make: one this sweep needs and the cache
cannot answer fails with that run's error (its item counts as an error, as in the run) and
nothing is sent. What the sweep says of them counts only what it saw: the items that errored
at its settings, and the cache that answered the rest. With
allow_calls, each missing call is sent at most once per sweep: one that fails is not sent
again at the next setting, which gets its error."""

from __future__ import annotations

import asyncio
import itertools
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.api import ItemSource, RunOptions, default_group, load_items
from runner.calibration.evaluate import EvalSpec, evaluate
from runner.calibration.labels import lookup, read_labels
from runner.engine.execute import Runtime, run_item, run_items
from runner.errors import NeedsModel, RunnerError
from runner.inputs import Item
from runner.pipeline.loader import load_pipeline
from runner.render.sink import RenderSink
from runner.runs.results_file import ResultsLog, ResultsView, rewrite_in_order

PARALLEL_FROM = 8                      # settings; fewer are not worth starting processes for
LOWER_IS_BETTER = {"mae"}
METRICS = ("kappa", "accuracy", "balanced_accuracy", "macro_f1", "mae", "pearson", "spearman")


@dataclass(frozen=True)
class Axis:
    key: str
    values: tuple[str, ...]


def parse_grid(texts: list[str]) -> list[Axis]:
    axes: list[Axis] = []
    for text in texts:
        key, sep, raw = text.partition("=")
        values = tuple(v.strip() for v in raw.split(",") if v.strip())
        if not sep or not key.strip() or not values:
            raise RunnerError(f"--grid {text}: expected KEY=V1,V2,..., e.g. --grid params.quote_threshold=0.7,0.8")
        if any(a.key == key.strip() for a in axes):
            raise RunnerError(f"--grid {text}: '{key.strip()}' is given twice")
        axes.append(Axis(key.strip(), values))
    if not axes:
        raise RunnerError("give at least one --grid KEY=V1,V2,...")
    return axes


@dataclass
class Setting:
    values: dict[str, str]
    status: str = "cached"             # cached, ran, needs_calls
    calls_needed: int = 0
    est_prompt_tokens: int = 0
    scores: dict[str, Any] = field(default_factory=dict)
    errors: int = 0                    # items that errored (scored as no prediction)

    @property
    def set_line(self) -> str:
        return " ".join(f"--set {k}={v}" for k, v in self.values.items())


@dataclass
class SweepRequest:
    pipeline: Path
    source: ItemSource
    spec: EvalSpec
    axes: list[Axis]
    cache_dir: Path
    overrides: list[str] = field(default_factory=list)
    metric: str | None = None          # default: kappa, or mae when the labels are numbers
    allow_calls: bool = False
    llm_concurrency: int = 8
    workers: int | None = None         # processes for the cached pass (default: the CPUs, from PARALLEL_FROM settings)
    failed_calls: dict[str, str] = field(default_factory=dict)   # cache key: error of calls known to fail


def run_sweep(request: SweepRequest, on_estimate: Callable[[list[Setting]], None] | None = None) -> dict[str, Any]:
    if request.metric is not None and request.metric not in METRICS:
        raise RunnerError(f"--metric {request.metric}: choose one of {', '.join(METRICS)}")
    rows = read_labels(request.spec.labels)
    settings = [Setting(dict(zip([a.key for a in request.axes], combo, strict=True)))
                for combo in itertools.product(*(a.values for a in request.axes))]
    pending: list[Setting] = []
    failed_in = None if request.allow_calls else _failed_before(request)
    probes = _probe_all(request, settings)
    for setting, probe in zip(settings, probes, strict=True):
        if probe.missing:
            setting.status = "needs_calls"
            setting.calls_needed = probe.stats["calls"] - probe.stats["cached"]
            setting.est_prompt_tokens = probe.stats["tokens"]
            pending.append(setting)
        else:
            setting.scores = probe.scores
    if pending and request.allow_calls:
        if on_estimate is not None:
            on_estimate(pending)
        for setting in pending:
            runtime, items = _prepare(request, setting.values, render=False)
            with tempfile.TemporaryDirectory(prefix="runner-sweep-") as folder:
                results = asyncio.run(_for_real(runtime, items, request.llm_concurrency, Path(folder)))
                setting.status = "ran"
                setting.scores = _score(request, runtime.pipeline.summary.get("count_by"), results, rows)
    report = _report(request, settings, probes[0].name)
    if failed_in is not None and request.failed_calls:
        seen = [int(s.get("errors") or 0) for s in report["settings"] if s.get("status") != "needs_calls"]
        report["failed_before"] = {"run": str(failed_in), "calls": len(request.failed_calls),
                                   "errored_items": sorted(set(seen)), "cache": str(request.cache_dir)}
    return report


def _failed_before(request: SweepRequest) -> Path | None:
    """The calls that failed in the latest complete run of this pipeline over this input (its
    calls.jsonl), put in `request.failed_calls`; that run's folder, or None."""
    from runner.llm.calls.file import read_calls
    from runner.runs.folders import CALLS_FILE, latest_run
    pipeline = load_pipeline(request.pipeline, request.overrides)
    if request.source.input_path is None:
        return None
    run = latest_run(default_group(pipeline, request.source))
    if run is None:
        return None
    answered: set[str] = set()
    for call in read_calls(run / CALLS_FILE):
        key = str(call.get("key") or "")
        if call.get("error") and not call.get("cached") and key:
            request.failed_calls.setdefault(key, str(call["error"]))
        elif key:
            answered.add(key)
    for key in answered:
        request.failed_calls.pop(key, None)
    return run


@dataclass
class Probe:
    scores: dict[str, Any]             # when nothing was missing (scored where it ran: no results cross processes)
    stats: dict[str, int]
    missing: int
    count_by: str | None
    name: str = ""                     # the pipeline's name
    error: str | None = None


def _probe_all(request: SweepRequest, settings: list[Setting]) -> list[Probe]:
    """Each setting from the cache: in worker processes when there are many (the settings
    are independent, and a cached item is CPU-bound work)."""
    workers = request.workers or (min(os.cpu_count() or 1, len(settings)) if len(settings) >= PARALLEL_FROM else 1)
    values = [s.values for s in settings]
    if workers <= 1:
        probes = [probe_setting(request, v) for v in values]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            probes = list(pool.map(probe_setting, [request] * len(values), values))
    for probe in probes:
        if probe.error is not None:
            raise RunnerError(probe.error)
    return probes


def probe_setting(request: SweepRequest, values: dict[str, str]) -> Probe:
    try:
        runtime, items = _prepare(request, values, render=True)
    except RunnerError as exc:              # returned, not raised: it crosses a process boundary
        return Probe({}, {}, 0, None, error=str(exc))
    count_by = runtime.pipeline.summary.get("count_by")
    with tempfile.TemporaryDirectory(prefix="runner-sweep-") as folder:
        results, stats, missing = asyncio.run(_from_cache(runtime, items, Path(folder)))
        scores = {} if missing else _score(request, count_by, results, read_labels(request.spec.labels))
    return Probe(scores, stats, missing, count_by, runtime.pipeline.name)


def _prepare(request: SweepRequest, values: dict[str, str], render: bool) -> tuple[Runtime, Iterable[Item]]:
    assignments = [f"{k}={v}" for k, v in values.items()]
    pipeline = load_pipeline(request.pipeline, [*request.overrides, *assignments])
    options = RunOptions(cache_dir=request.cache_dir, llm_concurrency=request.llm_concurrency,
                         input_path=str(request.source.input_path) if request.source.input_path else None,
                         failed_calls=request.failed_calls)
    runtime = Runtime.create(pipeline, options)
    runtime.preview = RenderSink() if render else None       # the cache pass: answers from the cache only
    return runtime, load_items(pipeline, request.source)


async def _from_cache(runtime: Runtime, items: Iterable[Item],
                      folder: Path) -> tuple[ResultsView, dict[str, int], int]:
    """Every item with cached answers only; an item that needs a new answer is counted, not sent.
    The results go to a results file in `folder`, not into memory."""
    missing = 0
    log = ResultsLog(folder / "results.jsonl")
    try:
        for item in items:
            try:
                log.append(await run_item(runtime, item))
            except NeedsModel:
                missing += 1
    finally:
        log.close()
        await runtime.aclose()
    return ResultsView(log.path), runtime.preview.stats if runtime.preview else {}, missing


async def _for_real(runtime: Runtime, items: Iterable[Item], concurrency: int, folder: Path) -> ResultsView:
    log = ResultsLog(folder / "results.jsonl")
    try:
        await run_items(runtime, items, concurrency, lambda _, result: log.append(result))
    finally:
        log.close()
        await runtime.aclose()
    rewrite_in_order(log.path)
    return ResultsView(log.path)


def _score(request: SweepRequest, count_by: str | None, results: ResultsView, rows: list[Any]) -> dict[str, Any]:
    report = evaluate(results, {"count_by": count_by}, request.spec, rows, detail=False)
    m = report["metrics"]
    predicted = report["predicted"]
    metric = request.metric or ("mae" if report["kind"] == "numeric" else "kappa")
    return {"metric_name": metric, "metric": m.get(metric), "kappa": m.get("kappa"),
            "accuracy": m.get("accuracy"), "scored": report["scored"],
            "errors": sum(1 for r in results if r.get("error")),
            "counts": dict(Counter(str(lookup(r, predicted)) for r in results).most_common())}


def _better(a: Any, b: Any, metric: str) -> bool:
    if a is None:
        return False
    if b is None:
        return True
    return a < b if metric in LOWER_IS_BETTER else a > b


def _report(request: SweepRequest, settings: list[Setting], name: str) -> dict[str, Any]:
    scored = [s for s in settings if s.scores]
    metric = scored[0].scores.pop("metric_name") if scored else request.metric or "kappa"
    for setting in scored:
        setting.scores.pop("metric_name", None)
    best: Setting | None = None
    for setting in scored:
        if best is None or _better(setting.scores.get("metric"), best.scores.get("metric"), metric):
            best = setting
    ties = [s.set_line for s in scored if best is not None and s is not best and best.scores.get("metric") is not None
            and s.scores.get("metric") == best.scores.get("metric")]
    return {"name": name, "pipeline": str(request.pipeline), "input": str(request.source.input_path),
            "labels": str(request.spec.labels), "metric": metric,
            "grid": {a.key: list(a.values) for a in request.axes},
            "settings": [{"set": s.values, "status": s.status, "calls_needed": s.calls_needed,
                          "est_prompt_tokens": s.est_prompt_tokens, "errors": 0, **s.scores} for s in settings],
            "best": None if best is None else {"set": best.values, "set_line": best.set_line, **best.scores,
                                               "ties": ties}}
