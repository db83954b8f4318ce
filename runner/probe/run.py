"""A probe run end to end: the pipeline over each item and its perturbed copies, in a run
folder of its own group (reports/<pipeline>/<input group>-probe/), then the comparison
written beside its results. Copies are judged, never taken from the pipeline's memo store
(a copy may share its original's memo key).

probe.json, probe.md and probe.html: one table of every probe's flip and failure rates (the
final verdict's and each juror's), and per juror a bar chart of its failure rate per probe
with the interval."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from runner.api import RunOutcome, RunRole, default_group, run_pipeline
from runner.calibration.eval_report import html_page, table
from runner.engine.progress import Progress
from runner.engine.rates import PassRule, pass_check
from runner.engine.selection import static_scope
from runner.errors import InputError, unknown
from runner.fileio import atomic_write, dumps
from runner.pipeline.loader import load_pipeline
from runner.pipeline.model import Pipeline
from runner.pipeline.probes import Probe
from runner.pipeline.validated import ValidatedPipelines
from runner.probe.measure import Originals, measure, plan, probe_items
from runner.runs.reads import load_items, spool_stdin
from runner.runs.request import ItemSource, RunOptions
from runner.runs.results_file import results_in_order
from runner.templating.sandbox import Renderer

GROUP_SUFFIX = "-probe"
BAR = "#cf222e"
CLEAN = "#1a7f37"


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


def rate_text(rate: float | None, interval: list[float] | None) -> str:
    if rate is None:
        return "-"
    return f"{rate:.3f}" + (f" ({interval[0]:.3f}-{interval[1]:.3f})" if interval else "")


def row_note(row: dict[str, Any]) -> str:
    """What a row's numbers are over, beyond its n: a numeric vote's tolerance and rule, the
    pairs left unjudged and why."""
    notes = []
    if row.get("vote") == "numeric":
        notes.append(f"numeric vote: a flip moves it by more than {row.get('tolerance')}; `not` and `changed` "
                     "through the pipeline's verdict with this vote")
    if row.get("unjudged"):
        notes.append(f"{row['unjudged']} pair(s) unjudged: {row.get('unjudged_why')}")
    return "; ".join(notes)


def probe_markdown(report: dict[str, Any]) -> str:
    rows = [[p["name"], p["expect"], row["who"], row["n"], row["flips"], rate_text(row["flip_rate"], row["flip_ci95"]),
             row["failures"], rate_text(row["failure_rate"], row["failure_ci95"]), row_note(row)]
            for p in report["probes"] for row in p["rows"]]
    out = [f"# Probes of {report['pipeline']} on {report['input']}\n",
           f"{report['items']} item(s) and {report['copies']} perturbed cop{'y' if report['copies'] == 1 else 'ies'} "
           f"in run {report['run']}{' (interrupted: the pairs that finished)' if report.get('interrupted') else ''}. "
           f"A flip is a copy whose verdict (`{report['verdict_field']}`, or a juror's vote) differs from its "
           f"original's; a failure is what a robust judge does not do (`expect`). Rates are over n pairs, with "
           "a 95% Wilson interval.\n",
           table(["probe", "expect", "who", "n", "flips", "flip rate (95% CI)", "failures",
                  "failure rate (95% CI)", "note"], rows)
           if rows else "No pair of an original and its copy was judged.\n",
           "## Copies\n"]
    for probe in report["probes"]:
        line = (f"- `{probe['name']}`: {probe['transform']} `{probe['field']}`, {probe['copies']} cop"
                f"{'y' if probe['copies'] == 1 else 'ies'}, {probe['not_applicable']} with nothing to perturb, "
                f"{probe['errored']} errored")
        example = probe.get("example")
        if example:
            line += f"; input item {example['item']}: {_quoted(example['before'])} became {_quoted(example['after'])}"
        out.append(line)
    return "\n".join(out) + "\n"


def _quoted(text: str) -> str:
    return "`" + " ".join(text.replace("`", "'").split()) + "`"


def bar_chart(who: str, probes: list[dict[str, Any]]) -> str:
    """Failure rate per probe (bars) with its interval (whiskers) and n, 0 to 1."""
    bars = [(p["name"], next((r for r in p["rows"] if r["who"] == who), None)) for p in probes]
    step, left, top, plot_h = 112, 44, 30, 150
    width, height = left + step * len(bars) + 16, top + plot_h + 64
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'font-family="system-ui, sans-serif"><title>{html.escape(who)}: failure rate per probe</title>',
             f'<text x="{left}" y="16" font-size="13">{html.escape(who)}: failure rate per probe (95% CI)</text>']
    for tick in (0.0, 0.5, 1.0):
        y = top + plot_h * (1 - tick)
        parts += [f'<line x1="{left}" y1="{y:.1f}" x2="{width - 16}" y2="{y:.1f}" stroke="#d0d7de"/>',
                  f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{tick:.1f}</text>']
    for n, (name, row) in enumerate(bars):
        x = left + step * n + 26
        label_y = top + plot_h + 14
        parts.append(f'<text x="{x + 30}" y="{label_y}" font-size="10" text-anchor="middle">'
                     f'{html.escape(name if len(name) <= 20 else name[:19] + "…")}</text>')
        if row is None or row["failure_rate"] is None:
            parts.append(f'<text x="{x + 30}" y="{label_y + 14}" font-size="10" text-anchor="middle" '
                         f'fill="#57606a">no pairs</text>')
            continue
        rate = row["failure_rate"]
        y = top + plot_h * (1 - rate)
        color = BAR if rate > 0 else CLEAN
        parts.append(f'<rect x="{x}" y="{y:.1f}" width="60" height="{max(plot_h * rate, 1.5):.1f}" fill="{color}" '
                     f'fill-opacity="0.75"><title>{html.escape(name)}: {rate:.3f}</title></rect>')
        if row["failure_ci95"]:
            low, high = (top + plot_h * (1 - v) for v in row["failure_ci95"])
            parts += [f'<line x1="{x + 30}" y1="{low:.1f}" x2="{x + 30}" y2="{high:.1f}" stroke="#1f2328"/>',
                      f'<line x1="{x + 22}" y1="{low:.1f}" x2="{x + 38}" y2="{low:.1f}" stroke="#1f2328"/>',
                      f'<line x1="{x + 22}" y1="{high:.1f}" x2="{x + 38}" y2="{high:.1f}" stroke="#1f2328"/>']
        parts.append(f'<text x="{x + 30}" y="{label_y + 14}" font-size="10" text-anchor="middle" fill="#57606a">'
                     f'{rate:.2f}, n={row["n"]}</text>')
    parts.append("</svg>")
    return "".join(parts)


def write_probe(folder: Path, report: dict[str, Any]) -> None:
    text = probe_markdown(report)
    charts = [bar_chart(who, report["probes"]) for who in ("verdict", *report["jurors"])]
    atomic_write(folder / "probe.json", dumps(report) + "\n")
    atomic_write(folder / "probe.md", text)
    atomic_write(folder / "probe.html", html_page(f"probes of {report['pipeline']}", text, charts,
                                                  "<h2>Failure rate per probe</h2>\n"))
