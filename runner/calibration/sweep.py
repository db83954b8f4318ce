"""`runner sweep`: every combination of a grid of `--set` values, replayed from the LLM cache.

Each setting is a run as `runner run --set ...` makes it (runner.api.run_pipeline), so its
items, errors, counts, rates and `run_failed` are that run's. It is answered from the cache
only, as `runner render` answers; a setting that needs calls the cache does not hold is
reported with them, and run for real only with allow_calls, each missing call sent at most
once per sweep.

A failed call is never cached, so the calls that failed in the latest run of the pipeline
over the same input fail with that run's error rather than being taken for calls to make."""

from __future__ import annotations

import itertools
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.api import ItemSource, RunOptions, RunRole, default_group, run_pipeline
from runner.calibration.evaluate import EvalSpec, evaluate
from runner.calibration.labels import LabelRow, read_labels
from runner.engine.execute import Runtime, run_item
from runner.engine.health import run_failure
from runner.errors import NeedsModel, RunnerError
from runner.inputs import Item
from runner.pipeline.loader import load_pipeline
from runner.render.sink import RenderSink

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
        key, values = key.strip(), tuple(v.strip() for v in raw.split(",") if v.strip())
        if not sep or not key or not values:
            raise RunnerError(f"--grid {text}: expected KEY=V1,V2,..., e.g. --grid params.quote_threshold=0.7,0.8")
        if any(a.key == key for a in axes):
            raise RunnerError(f"--grid {text}: '{key}' is given twice")
        axes.append(Axis(key, values))
    if not axes:
        raise RunnerError("give at least one --grid KEY=V1,V2,...")
    return axes


@dataclass
class Setting:
    """One setting and its run: its scores (scored where it ran: no results cross processes), or
    the calls it would make when the cache does not hold every answer."""

    values: dict[str, str]
    status: str = "cached"             # cached, ran, needs_calls
    calls_needed: int = 0               # LLM calls the cache does not hold (a search request is not one)
    est_prompt_tokens: int = 0
    items_waiting: int = 0              # the items that reached a request the cache does not hold
    scores: dict[str, Any] = field(default_factory=dict)
    name: str = ""                     # the pipeline's name
    error: str | None = None


def set_line(values: dict[str, str]) -> str:
    """A setting as the `--set` options that make it."""
    return " ".join(f"--set {k}={v}" for k, v in values.items())


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
    grid = [dict(zip([a.key for a in request.axes], combo, strict=True))
            for combo in itertools.product(*(a.values for a in request.axes))]
    rows = read_labels(request.spec.labels)      # a labels file that cannot be read is said before any run
    failed_in = None if request.allow_calls else _failed_before(request)
    settings = _from_cache(request, grid, rows)
    pending = [setting for setting in settings if setting.status == "needs_calls"]
    if pending and request.allow_calls:
        if on_estimate is not None:
            on_estimate(pending)
        for setting in pending:
            setting.status, setting.scores = "ran", run_setting(request, setting.values, rows, cache_only=False).scores
    report = _report(request, settings, settings[0].name)
    if failed_in is not None and request.failed_calls:
        run, items = failed_in
        seen = [int(s.get("errors") or 0) for s in report["settings"] if s.get("status") != "needs_calls"]
        report["failed_before"] = {"run": str(run), "calls": len(request.failed_calls), "items": items,
                                   "errored_items": sorted(set(seen)), "cache": str(request.cache_dir)}
    return report


def _failed_before(request: SweepRequest) -> tuple[Path, int] | None:
    """The calls that failed in the latest complete run of this pipeline over this input (its
    calls.jsonl), put in `request.failed_calls`; that run's folder and how many of its items
    made them, or None."""
    from runner.llm.calls.file import read_calls
    from runner.runs.folders import CALLS_FILE, latest_run
    pipeline = load_pipeline(request.pipeline, request.overrides)
    if request.source.input_path is None:
        return None
    run = latest_run(default_group(pipeline, request.source))
    if run is None:
        return None
    answered: set[str] = set()
    items: dict[str, set[int]] = {}
    for call in read_calls(run / CALLS_FILE):
        key = str(call.get("key") or "")
        if call.get("error") and not call.get("cached") and key:
            request.failed_calls.setdefault(key, str(call["error"]))
            if isinstance(call.get("item"), int):
                items.setdefault(key, set()).add(call["item"])
        elif key:
            answered.add(key)
    for key in answered:
        request.failed_calls.pop(key, None)
    return run, len(set().union(*(items.get(key, set()) for key in request.failed_calls)))


def _from_cache(request: SweepRequest, values: list[dict[str, str]], rows: list[LabelRow]) -> list[Setting]:
    """Each setting from the cache: in worker processes when there are many (the settings
    are independent, and a cached item is CPU-bound work)."""
    workers = request.workers or (min(os.cpu_count() or 1, len(values)) if len(values) >= PARALLEL_FROM else 1)
    if workers <= 1:
        settings = [run_setting(request, v, rows) for v in values]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            settings = list(pool.map(run_setting, [request] * len(values), values, [rows] * len(values)))
    for setting in settings:
        if setting.error is not None:
            raise RunnerError(setting.error)
    return settings


def run_setting(request: SweepRequest, values: dict[str, str], rows: list[LabelRow],
                cache_only: bool = True) -> Setting:
    """One setting run as `runner run --set ...` runs it, into a folder that goes when it is
    scored. `cache_only`: an item that needs an answer the cache does not hold is counted
    (with the calls it would make), not sent."""
    preview = RenderSink()                  # the LLM's transport then: answers from the cache only
    missing = 0

    async def from_cache(runtime: Runtime, item: Item) -> dict[str, Any]:
        nonlocal missing
        try:
            return await run_item(runtime, item)
        except NeedsModel as stop:
            missing += 1
            return {"index": item.index, "item_key": item.key, "error": f"not cached: {stop}"}

    assignments = [f"{k}={v}" for k, v in values.items()]
    try:
        with tempfile.TemporaryDirectory(prefix="runner-sweep-") as folder:
            options = RunOptions(cache_dir=request.cache_dir, out_dir=Path(folder), trace="none",
                                 llm_concurrency=request.llm_concurrency, failed_calls=request.failed_calls)
            outcome = run_pipeline(request.pipeline, request.source, options, [*request.overrides, *assignments],
                                   role=RunRole(item_runner=from_cache, preview=preview) if cache_only else None)
            outcome.stop_if_interrupted()
            scores = {} if missing else _score(request, outcome.summary, outcome.results, rows)
    except RunnerError as exc:              # returned, not raised: it crosses a process boundary
        return Setting(values, error=str(exc))
    name, stats = outcome.pipeline.name, preview.stats
    if missing:
        return Setting(values, "needs_calls", stats["calls"] - stats["cached"], stats["tokens"], name=name,
                       items_waiting=missing)
    return Setting(values, scores=scores, name=name)


def _score(request: SweepRequest, summary: dict[str, Any], results: Iterable[dict[str, Any]],
           rows: list[LabelRow]) -> dict[str, Any]:
    """The setting's scores against the labels, its summary's total, errors, counts and rates,
    and `run_failed` (as `runner run` exits 3)."""
    report = evaluate(results, summary, request.spec, rows, detail=False)
    m = report["metrics"]
    metric = request.metric or ("mae" if report["kind"] == "numeric" else "kappa")
    failure = run_failure(summary)
    return {"metric_name": metric, "metric": m.get(metric), "kappa": m.get("kappa"),
            "accuracy": m.get("accuracy"), "scored": report["scored"], "items": summary["total"],
            "errors": summary["errors"], "counts": dict(Counter(summary.get("counts") or {}).most_common()),
            "rates": summary.get("rates") or {}, **({"run_failed": failure} if failure else {})}


def _report(request: SweepRequest, settings: list[Setting], name: str) -> dict[str, Any]:
    scored = [s for s in settings if s.scores]
    names = [setting.scores.pop("metric_name") for setting in scored]
    metric = names[0] if names else request.metric or "kappa"
    sign = -1 if metric in LOWER_IS_BETTER else 1           # the first of the best; a metric n/a ranks last
    best = max((s for s in scored if s.scores.get("metric") is not None), key=lambda s: sign * s.scores["metric"],
               default=scored[0] if scored else None)
    ties = [set_line(s.values) for s in scored if best is not None and s is not best
            and best.scores.get("metric") is not None and s.scores.get("metric") == best.scores.get("metric")]
    return {"name": name, "pipeline": str(request.pipeline), "input": str(request.source.input_path),
            "labels": str(request.spec.labels), "metric": metric,
            "grid": {a.key: list(a.values) for a in request.axes},
            "settings": [{"set": s.values, "status": s.status, "calls_needed": s.calls_needed,
                          "items_waiting": s.items_waiting,
                          "est_prompt_tokens": s.est_prompt_tokens, "errors": 0, **s.scores} for s in settings],
            "best": None if best is None else {"set": best.values, "set_line": set_line(best.values), **best.scores,
                                               "ties": ties}}
