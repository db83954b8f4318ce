"""A probe run end to end: the pipeline over each item and its perturbed copies, in a run
folder of its own group (reports/<pipeline>/<input group>-probe/), then the comparison
written beside its results. Copies are judged, never taken from the pipeline's memo store
(a copy may share its original's memo key)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from runner.api import RunOutcome, RunRole, default_group, run_pipeline
from runner.engine.progress import Progress
from runner.engine.rates import PassRule, pass_check
from runner.engine.selection import static_scope
from runner.errors import InputError, unknown
from runner.pipeline.loader import load_pipeline
from runner.pipeline.model import Pipeline
from runner.pipeline.probes import Probe
from runner.pipeline.validated import ValidatedPipelines
from runner.probe.measure import Originals, measure
from runner.probe.plan import plan, probe_items
from runner.probe.probe_report import write_probe
from runner.runs.reads import load_items, spool_stdin
from runner.runs.request import ItemSource, RunOptions
from runner.runs.results_file import results_in_order
from runner.templating.sandbox import Renderer

GROUP_SUFFIX = "-probe"


def chosen_probes(pipeline: Pipeline, names: Sequence[str]) -> list[Probe]:
    """The pipeline's probes, or those named (in the file's order)."""
    if not pipeline.probes:
        raise InputError(f"pipeline '{pipeline.name}' declares no probes: add a `probes:` block "
                         "(docs/robustness.md says how)")
    known = {p.name: p for p in pipeline.probes}
    for name in names:
        if name not in known:
            raise InputError(f"--probes: {unknown('probe', name, known, 'probes')}")
    return [p for p in pipeline.probes if not names or p.name in names]


def probe_pipeline(path: Path, source: ItemSource, options: RunOptions, overrides: list[str],
                   names: Sequence[str], items: int | None,
                   progress: Progress | None = None) -> tuple[dict[str, Any], RunOutcome]:
    """Run the probe run and write probe.json, probe.md and probe.html into its folder; the
    report and the run. Interrupted, the report is of what finished (the run says so)."""
    pipeline = load_pipeline(path, overrides, validated=ValidatedPipelines(options.cache_dir))
    probes = chosen_probes(pipeline, names)
    try:
        spool_stdin(source)            # `--input -`: read by the run, then again for the pairing
        originals = replace(source)            # the same items, without the copies: for the pairing
        probed = replace(source, derive=probe_items(probes, items))     # the caller's source and options stay as given
        if options.out_dir is None:
            group = default_group(pipeline, source)
            options = replace(options, group=group.with_name(group.name + GROUP_SUFFIX))
        outcome = run_pipeline(path, probed, options, overrides, progress, role=RunRole(kind="probe"))
        return _report(outcome, originals, probes, items), outcome
    finally:
        source.discard_stdin_copy()


def _report(outcome: RunOutcome, originals: ItemSource, probes: list[Probe], items: int | None) -> dict[str, Any]:
    pipeline = outcome.pipeline
    verdict_field = str(pipeline.summary.count_by)          # the loader refuses probes without it
    planned = plan(load_items(pipeline, originals), probes, items)
    first = Originals(verdict_field, _rate_checks(pipeline))
    tallies, jurors = measure(planned, results_in_order(outcome.out_dir), _passes(pipeline), probes, first)
    report = {
        "pipeline": pipeline.name, "input": str(originals.input_path) if originals.input_path else "--record",
        "run": str(outcome.out_dir), "verdict_field": verdict_field, "items": first.items,
        "copies": sum(t.copies for t in tallies), "jurors": jurors, "interrupted": outcome.interrupted,
        "originals": first.view(),
        "probes": [{"name": t.probe.name, "description": t.probe.description, "transform": t.probe.kind,
                    "field": t.probe.field, "expect": t.probe.describe_expect(), "variants": t.probe.variants,
                    "copies": t.copies, "not_applicable": t.not_applicable, "errored": t.errored,
                    "example": t.example,
                    "rows": [counts.row(who, t.probe.tolerance) for who, counts in t.rows.items()]}
                   for t in tallies],
    }
    write_probe(outcome.out_dir, report)
    return report


def _rate_checks(pipeline: Pipeline) -> dict[str, Callable[[dict[str, Any]], bool | None]]:
    """Each summary rate's test of one result, as the pipeline says now (a template failure is raised)."""
    condition = Renderer(pipeline.prompts_dir, read_only=True).condition
    scope = {**static_scope(pipeline), "run": {}}
    return {str(name): PassRule(str(name), str(expression)).checker(condition, scope, ())
            for name, expression in pipeline.summary.rates.items()}


def _passes(pipeline: Pipeline) -> Callable[[dict[str, Any]], bool]:
    """Whether a result meets the pipeline's pass rule (every result does when it has none)."""
    checked = pass_check(pipeline.summary, Renderer(pipeline.prompts_dir, read_only=True), static_scope(pipeline))
    return lambda result: checked is None or checked[1](result) is True
