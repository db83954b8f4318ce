"""The `runner` command: parse arguments, call the API, map errors to exit codes."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from runner import __version__
from runner.cli import batches, calibration, init, pipelines, probe, tools, view
from runner.cli.base import (
    CacheDirOpt,
    InputFormatOpt,
    InputOpt,
    ModelOpt,
    NoCacheOpt,
    PipelineArg,
    QuietOpt,
    RecordOpt,
    RunnerApp,
    SetOpt,
    cache_dir_of,
    echo_run_notes,
    fail,
    overrides_of,
)

app = RunnerApp(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
           help="Declarative YAML pipelines for LLM-as-judge verification.")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"runner {__version__}")
        raise typer.Exit(0)


@app.callback()
def main_options(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                       help="Show the version and exit.")] = False) -> None:
    """Declarative YAML pipelines for LLM-as-judge verification."""


FormatOpt = Annotated[list[str] | None, typer.Option(
    "--format", help="Also write results.csv (csv) or junit.xml (junit); repeat for both.")]


def run(pipeline: PipelineArg,
        input: InputOpt = None, record: RecordOpt = None, input_format: InputFormatOpt = None,
        out: Annotated[Path | None, typer.Option(
            "--out", help="Output folder, written exactly there (default: a new folder per run under "
                          "reports/<pipeline>/<input stem>-<hash>/, with a `latest` pointer).")] = None,
        set_: SetOpt = None, model: ModelOpt = None,
        concurrency: Annotated[int | None, typer.Option(
            help="N: LLM requests in flight across the run (default 8; per worker with --executor processes or "
                 "ray), and as many items in flight, so that N requests are reached, unless the pipeline pins its "
                 "items with `concurrency:` (the run then says so). A model's limits.concurrency caps its own "
                 "requests; a server on this machine gets N unless its model sets that.", min=1)] = None,
        limit: Annotated[int | None, typer.Option(help="Only the first N items (a partial run).", min=1)] = None,
        item: Annotated[int | None, typer.Option("--item", help="Only item N, 1-based (a partial run).", min=1)]
        = None,
        filter_: Annotated[str | None, typer.Option(
            "--filter", help="Only items for which this expression over `item` is true, "
                             "e.g. \"item.file == 'a.txt'\".")] = None,
        failed_from: Annotated[Path | None, typer.Option(
            "--failed-from", help="Rerun the items that errored or failed the pass rule in this earlier run "
                                  "(its folder, or its group folder for the latest complete run), and those an "
                                  "interrupted run never judged; the new run holds the parent's other results "
                                  "too, so it covers the whole input. Refused for a run judged otherwise "
                                  "(other params, prompts or steps).")] = None,
        cache_dir: CacheDirOpt = None,
        no_cache: NoCacheOpt = False,
        no_cache_as: Annotated[bool, typer.Option(
            "--no-cache-as", help="Key each model's cached answers by its own endpoint, never by its `cache_as` "
                                  "name: answers made by another server are not reused.")] = False,
        formats: FormatOpt = None,
        csv_raw: Annotated[bool, typer.Option(
            "--csv-raw", help="results.csv cells exactly as the results hold them: no ' before a cell "
                              "starting with = + - @ (a spreadsheet may run such a cell as a formula).")] = False,
        fail_under: Annotated[float | None, typer.Option(
            "--fail-under", min=0.0, max=1.0,
            help="Exit 1 when the pipeline's first summary rate (the pass rate, e.g. verification_rate) is "
                 "below RATE, is n/a, or left out more items than --max-errors allows. Rates run from 0 to 1: "
                 "0.8 means 80%.")] = None,
        max_errors: Annotated[str | None, typer.Option(
            "--max-errors", help="Exit 3 when more items than this errored: a count (5), a fraction (0.2) or a "
                                 "percentage (20%); default: only when every item errored. With --fail-under it "
                                 "is also how many items the rate may leave out (errored, or its expression "
                                 "undefined): none by default, so the gate fails closed (exit 1).")] = None,
        quiet: QuietOpt = False,
        trace: Annotated[str | None, typer.Option(
            "--trace", help="Trace every item: mlflow (to $MLFLOW_TRACKING_URI) or none; "
                            "default: the pipeline's tracing.backend.")] = None,
        batch: Annotated[bool, typer.Option(
            "--batch", help="Answer through the provider's batch API (half the price, within hours) every model "
                            "that has one (OpenAI-compatible /v1/batches); the others stay live.")] = False,
        executor: Annotated[str, typer.Option(
            "--executor", help="Where items run: local (this process), processes (--workers processes on this "
                               "machine) or ray (a Ray cluster: --ray-address, --workers).")] = "local",
        ray_address: Annotated[str | None, typer.Option(
            "--ray-address", help="The Ray cluster to join (auto, ray://host:10001); without it --executor ray "
                                  "starts Ray on this machine.")] = None,
        workers: Annotated[int | None, typer.Option(
            "--workers", help="Worker processes or Ray workers (each runs blocks of items); default: one per "
                              "CPU of this machine (processes) or of the cluster (ray).",
            min=1, max=4096)] = None,
        ) -> None:
    """Run a pipeline over --input (or one --record) and write results, summary, report and run.json."""
    from runner.api import ItemSource, run_pipeline
    from runner.engine.executors import ExecutorChoice
    from runner.engine.health import TOO_MANY_ERRORS, MaxErrors, run_failure
    from runner.engine.progress import for_terminal
    from runner.runs.request import RunOptions, Selection
    if formats:
        from runner.outputs.exports import FORMATS  # csv and xml only for --format
        if unknown := [f for f in formats if f not in FORMATS]:
            fail(f"--format {unknown[0]}: choose from {', '.join(FORMATS)}")
    from runner.tracing import check_trace
    check_trace(trace)
    allowed = MaxErrors.parse(max_errors)
    flags = [*(["--max-errors", max_errors] if max_errors is not None else []), *(["--quiet"] if quiet else []),
             *(["--executor", executor] if executor != "local" else []),
             *(["--ray-address", ray_address] if ray_address else []),
             *(["--workers", str(workers)] if workers else [])]
    options = RunOptions(cache_dir=cache_dir_of(cache_dir), no_cache=no_cache, llm_concurrency=concurrency or 8,
                         concurrency_given=concurrency is not None, out_dir=out, trace=trace, fail_under=fail_under,
                         command_flags=flags, batch=batch, csv_raw=csv_raw, no_cache_as=no_cache_as)
    source = ItemSource(input, record or [], limit, Selection(item, filter_, failed_from), input_format=input_format)
    outcome = run_pipeline(pipeline, source, options, overrides_of(set_, model), for_terminal(quiet),
                           formats or [], ExecutorChoice(executor, ray_address, workers))
    summary = outcome.summary
    if outcome.interrupted:              # what finished, then the interruption's message and exit code
        if summary:
            typer.echo(_summary_line(summary, outcome.out_dir))
        outcome.stop_if_interrupted()
    echo_run_notes(summary)
    typer.echo(_summary_line(summary, outcome.out_dir))
    if failure := run_failure(summary, allowed):
        fail(failure, TOO_MANY_ERRORS)
    if fail_under is not None:
        _check_rate(outcome.pipeline, summary, fail_under, max_errors)


def _extent(summary: dict[str, Any]) -> str:
    """`13 item(s)`, or `159 of 300 item(s), interrupted` / `2 of 13 item(s), partial` when the run is not whole."""
    total = summary.get("total", 0)
    if summary.get("interrupted"):
        return f"{total} of {summary.get('planned', '?')} item(s), interrupted"
    if summary.get("partial"):
        return f"{total} of {summary.get('input_items', '?')} item(s), partial"
    if summary.get("rerun_of"):
        return f"{total} item(s), {summary.get('rerun_items', 0)} rerun and the others from {summary['rerun_of']}"
    return f"{total} item(s)"


def _summary_line(summary: dict[str, Any], out_dir: Path) -> str:
    from runner.outputs.report_format import count_label  # `VALID\v` must not read as a second VALID
    counts = ", ".join(f"{count_label(str(k))}: {v}" for k, v in (summary.get("counts") or {}).items())
    models = (summary.get("models") or {}).values()
    failed = sum(m.get("failures", 0) for m in models)
    calls = (f"LLM calls: {sum(m.get('calls', 0) for m in models)} sent, "
             f"{sum(m.get('cache_hits', 0) for m in models)} cached{f', {failed} failed' if failed else ''}"
             f"{_batched(summary)}; " if models else "")
    return (f"{_extent(summary)}{' (' + counts + ')' if counts else ''}; "
            f"errors: {summary.get('errors', 0)}; {calls}written to {out_dir}")


def _batched(summary: dict[str, Any]) -> str:
    """` (21 in 3 provider batch(es))`, and the answers collected from batches another run submitted."""
    batches = list((summary.get("batches") or {}).values())
    if not batches:
        return ""
    submitted, requests, resumed, collected = (sum(b.get(name, 0) for b in batches)
                                               for name in ("batches", "requests", "resumed", "collected"))
    parts = [f"{requests} in {submitted} provider batch(es)" if submitted or not resumed else "",
             f"{collected} collected from {resumed} provider batch(es) another run submitted" if resumed else ""]
    return f" ({'; '.join(part for part in parts if part)})"


def _check_rate(pipeline: Any, summary: dict[str, Any], fail_under: float, max_errors: str | None) -> None:
    from runner.engine.health import gate_allowance, rate_gate
    from runner.engine.rates import PassRule
    rule = PassRule.first_rate(pipeline.summary)
    assert rule is not None, "a pipeline without rates is refused --fail-under before the run (check_before_run)"
    passed, line = rate_gate(summary, rule.name, fail_under, gate_allowance(max_errors), max_errors is not None)
    typer.echo(line, err=True)
    if not passed:
        raise typer.Exit(1)


def render(pipeline: PipelineArg,
           input: InputOpt = None, record: RecordOpt = None, input_format: InputFormatOpt = None,
           set_: SetOpt = None, model: ModelOpt = None,
           item: Annotated[int | None, typer.Option("--item", help="Only item N (1-based).", min=1)] = None,
           limit: Annotated[int | None, typer.Option(help="Only the first N items.", min=1)] = None,
           cache_dir: CacheDirOpt = None,
           batch: Annotated[bool, typer.Option("--batch", help="Estimate the cost as `run --batch` would pay "
                                                                "(the batch price).")] = False) -> None:
    """Dry run: print every prompt the LLM steps would send; sends nothing."""
    from runner.api import ItemSource, render_pipeline
    from runner.runs.request import RunOptions
    render_pipeline(pipeline, ItemSource(input, record or [], limit, input_format=input_format),
                    RunOptions(cache_dir=cache_dir_of(cache_dir), batch=batch), sys.stdout, overrides_of(set_, model),
                    item)


# Registered in the order `runner --help` lists them.
app.command()(init.init)
app.command()(pipelines.validate)
app.command()(run)
app.command()(render)
app.command("list")(pipelines.list_pipelines)
app.command()(pipelines.steps)
app.command()(pipelines.params)
app.command()(tools.feedback)
app.command()(tools.diff)
app.command()(tools.calls)
app.command("eval", interrupted="nothing evaluated (a pipeline's finished items are written)")(calibration.eval_command)
app.command("sweep", interrupted="no sweep written")(calibration.sweep_command)
app.command("align", interrupted="nothing shipped (the runs that finished are in the align folder)")(
    calibration.align_command)
app.command("probe", interrupted="the finished items and the probe report of their pairs are written")(
    probe.probe_command)
app.command("view", interrupted="stopped")(view.view)
app.command("batches")(batches.batches)
app.command("serve", interrupted="stopped (each job resumes at the next start)")(view.serve)
app.add_typer(tools.cache_app, name="cache")
app.add_typer(view.labels_app, name="labels")
app.add_typer(init.import_app, name="import")


def main() -> None:
    app.narrowed_to(sys.argv[1:])()


def entry() -> None:
    """The `runner` command: main(), then exit without the interpreter's teardown, which
    spends up to seconds collecting the objects of big libraries (litellm above all);
    every file is written and closed by then (bench/exit_time.py). The garbage collector
    runs every 10,000 allocations rather than 700: a run makes many short-lived objects
    a call, and most collections walked them for nothing (cycles are still collected)."""
    gc.set_threshold(10_000, 20, 20)
    code: int | str | None = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    sys.stdout.flush()
    sys.stderr.flush()
    if isinstance(code, str):
        sys.stderr.write(code + "\n")
        code = 1
    os._exit(code or 0)


if __name__ == "__main__":
    entry()
