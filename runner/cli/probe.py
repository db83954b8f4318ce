"""`runner probe`: how far a judge can be trusted (runner/probe/)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runner.cli.base import (
    CacheDirOpt,
    InputOpt,
    ModelOpt,
    NoCacheOpt,
    QuietOpt,
    RecordOpt,
    SetOpt,
    cache_dir_of,
    echo_run_notes,
    fail,
    overrides_of,
)


def probe_command(
        pipeline: Annotated[Path, typer.Argument(help="Pipeline file (with a `probes:` block).")],
        input: InputOpt = None, record: RecordOpt = None,
        probes: Annotated[str | None, typer.Option(
            "--probes", help="Only these probes, by name, comma-separated (default: every probe the pipeline "
                             "declares).")] = None,
        items: Annotated[int | None, typer.Option(
            "--items", help="Only the first N items (and their copies).", min=1)] = None,
        out: Annotated[Path | None, typer.Option(
            "--out", help="Output folder (default: a new folder per probe run under "
                          "reports/<pipeline>/<input stem>-<hash>-probe/).")] = None,
        set_: SetOpt = None,
        model: ModelOpt = None,
        concurrency: Annotated[int | None, typer.Option(help="LLM requests in flight (default 8).", min=1)] = None,
        cache_dir: CacheDirOpt = None,
        no_cache: NoCacheOpt = False,
        quiet: QuietOpt = False) -> None:
    """Run a pipeline on its items and on perturbed copies (its `probes:`): how often each juror's
    verdict and the final one flip, per probe, in probe.json, probe.md and probe.html."""
    from runner.engine.health import TOO_MANY_ERRORS, MaxErrors
    from runner.engine.progress import for_terminal
    from runner.probe.run import probe_pipeline, rate_text, row_note
    from runner.runs.request import ItemSource, RunOptions
    names = [name.strip() for name in (probes or "").split(",") if name.strip()]
    flags = [*(["--probes", ",".join(names)] if names else []), *(["--items", str(items)] if items else []),
             *(["--quiet"] if quiet else [])]
    options = RunOptions(cache_dir=cache_dir_of(cache_dir), no_cache=no_cache, llm_concurrency=concurrency or 8,
                         concurrency_given=concurrency is not None, out_dir=out, command_flags=flags)
    report, outcome = probe_pipeline(pipeline, ItemSource(input, record or []), options, overrides_of(set_, model),
                                     names, items, for_terminal(quiet))
    outcome.stop_if_interrupted()          # its report is of what finished
    summary = outcome.summary
    echo_run_notes(summary)
    typer.echo(f"{report['items']} item(s), {report['copies']} perturbed cop{'y' if report['copies'] == 1 else 'ies'}; "
               f"verdict field {report['verdict_field']}")
    for probe in report["probes"]:
        typer.echo(f"{probe['name']} (expect {probe['expect']}): {probe['copies']} cop"
                   f"{'y' if probe['copies'] == 1 else 'ies'}, {probe['not_applicable']} with nothing to perturb, "
                   f"{probe['errored']} errored")
        for row in probe["rows"]:
            note = row_note(row)
            typer.echo(f"  {row['who']}: n {row['n']}, flip rate {rate_text(row['flip_rate'], row['flip_ci95'])}, "
                       f"failure rate {rate_text(row['failure_rate'], row['failure_ci95'])}"
                       + (f" ({note})" if note else ""))
    folder = Path(report["run"])
    typer.echo(f"written to {folder / 'probe.md'}, probe.html and probe.json")
    if MaxErrors().exceeded(int(summary.get("errors") or 0), int(summary.get("total") or 0)):
        fail(f"probe failed: every item errored (exit code {TOO_MANY_ERRORS})", TOO_MANY_ERRORS)
