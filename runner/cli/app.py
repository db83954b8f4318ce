"""The `runner` command: parse arguments, call the API, map errors to exit codes."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.models import CommandFunctionType

import runner.cli.tools as cli_tools
from runner import __version__
from runner.cli.common import CacheDirOpt, cache_dir_of
from runner.errors import RunnerError


def user_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """The one place a RunnerError becomes its message on stderr and its exit code (2), and
    an interruption its own (Ctrl-C 130; a run has written what finished by then)."""

    @functools.wraps(command)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except RunnerError as exc:
            typer.echo(str(exc), err=True)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt as stop:
            typer.echo("interrupted: finished items are written", err=True)
            raise typer.Exit(getattr(stop, "exit_code", 130)) from None
    return guarded


class _App(typer.Typer):
    """Every command, whoever adds it, maps user errors through `user_errors`."""

    def command(self, name: str | None = None, **kwargs: Any) -> Callable[[CommandFunctionType], CommandFunctionType]:
        register = super().command(name, **kwargs)

        def decorator(function: CommandFunctionType) -> CommandFunctionType:
            register(user_errors(function))
            return function
        return decorator


app = _App(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
           help="Declarative YAML pipelines for LLM-as-judge verification.")

InputOpt = Annotated[Path | None, typer.Option("--input", "-i", help="Input file (adapter set by the pipeline).")]
RecordOpt = Annotated[list[str] | None, typer.Option("--record", help="KEY=VALUE of one ad-hoc item (repeat).")]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="Override any pipeline key: a.b.c=VALUE (YAML).")]
ModelOpt = Annotated[list[str] | None, typer.Option(
    "--model", help="Judge with this model: NAME=provider/model[@api_base] points the pipeline's model NAME "
                    "there and seats it, e.g. judge=openai/gpt-4o-mini (repeat for more).")]
CacheOpt = CacheDirOpt


def _overrides(sets: list[str] | None, models: list[str] | None) -> list[str]:
    """--set assignments, then each --model as the loader's `--model NAME=...` text."""
    from runner.pipeline.overrides import MODEL_FLAG
    return [*(sets or []), *(MODEL_FLAG + text for text in models or [])]
_cache_dir = cache_dir_of


def _version(value: bool) -> None:
    if value:
        typer.echo(f"runner {__version__}")
        raise typer.Exit(0)


@app.callback()
def main_options(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                       help="Show the version and exit.")] = False) -> None:
    """Declarative YAML pipelines for LLM-as-judge verification."""


@app.command()
def validate(pipelines: Annotated[list[Path], typer.Argument(help="Pipeline files.")],
             set_: SetOpt = None) -> None:
    """Check pipeline files: schema, references, templates, models. Exit 0 or 2."""
    from runner.pipeline.loader import load_pipeline
    failed = False
    for path in pipelines:
        try:
            pipeline = load_pipeline(path, set_ or [])
            typer.echo(f"{path}: ok ({len(pipeline.steps)} steps)")
        except RunnerError as exc:
            typer.echo(str(exc), err=True)
            failed = True
    raise typer.Exit(2 if failed else 0)


FormatOpt = Annotated[list[str] | None, typer.Option(
    "--format", help="Also write results.csv (csv) or junit.xml (junit); repeat for both.")]


@app.command()
def run(pipeline: Annotated[Path, typer.Argument(help="Pipeline file.")],
        input: InputOpt = None, record: RecordOpt = None,
        out: Annotated[Path | None, typer.Option(
            "--out", help="Output folder, written exactly there (default: a new folder per run under "
                          "reports/<pipeline>/<input stem>/, with a `latest` pointer).")] = None,
        set_: SetOpt = None, model: ModelOpt = None,
        concurrency: Annotated[int, typer.Option(help="LLM requests in flight across the run.", min=1)] = 8,
        limit: Annotated[int | None, typer.Option(help="Only the first N items.", min=1)] = None,
        item: Annotated[int | None, typer.Option("--item", help="Only item N (1-based).", min=1)] = None,
        filter_: Annotated[str | None, typer.Option(
            "--filter", help="Only items for which this expression over `item` is true, "
                             "e.g. \"item.file == 'a.txt'\".")] = None,
        failed_from: Annotated[Path | None, typer.Option(
            "--failed-from", help="Only the items that errored or failed the pass rule in this earlier run "
                                  "(its folder, or its group folder for the latest run).")] = None,
        cache_dir: CacheOpt = None,
        no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read the cache (still writes).")] = False,
        formats: FormatOpt = None,
        fail_under: Annotated[float | None, typer.Option(
            "--fail-under", min=0.0, max=1.0,
            help="Exit 1 when the pipeline's first summary rate (the pass rate, e.g. verification_rate) is "
                 "below RATE. Rates run from 0 to 1: 0.8 means 80%.")] = None,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
        trace: Annotated[str | None, typer.Option(
            "--trace", help="Trace every item: mlflow (to $MLFLOW_TRACKING_URI) or none; "
                            "default: the pipeline's tracing.backend.")] = None,
        ) -> None:
    """Run a pipeline over --input (or one --record) and write results, summary and report."""
    from runner.api import ItemSource, run_pipeline
    from runner.engine.context import RunOptions
    from runner.engine.progress import for_terminal
    from runner.engine.selection import Selection
    if formats:
        from runner.outputs.exports import FORMATS  # csv and xml only for --format
        unknown = [f for f in formats if f not in FORMATS]
        if unknown:
            typer.echo(f"--format {unknown[0]}: choose from {', '.join(FORMATS)}", err=True)
            raise typer.Exit(2)
    from runner.tracing import BACKENDS
    if trace is not None and trace not in BACKENDS:
        typer.echo(f"--trace {trace}: choose from {', '.join(BACKENDS)}", err=True)
        raise typer.Exit(2)
    options = RunOptions(cache_dir=_cache_dir(cache_dir), no_cache=no_cache, llm_concurrency=concurrency, out_dir=out,
                         trace=trace)
    source = ItemSource(input, record or [], limit, Selection(item, filter_, failed_from))
    outcome = run_pipeline(pipeline, source, options, _overrides(set_, model), for_terminal(quiet), formats or [])
    summary = outcome.summary
    for note in [*summary.get("hints", []), *(f"warning: {w}" for w in summary.get("run_warnings", []))]:
        typer.echo(note, err=True)
    counts = ", ".join(f"{k}: {v}" for k, v in (summary.get("counts") or {}).items())
    models = (summary.get("models") or {}).values()
    failed = sum(m.get("failures", 0) for m in models)
    calls = (f"LLM calls: {sum(m.get('calls', 0) for m in models)} sent, "
             f"{sum(m.get('cache_hits', 0) for m in models)} cached{f', {failed} failed' if failed else ''}; "
             if models else "")
    typer.echo(f"{summary['total']} item(s){' (' + counts + ')' if counts else ''}; "
               f"errors: {summary['errors']}; {calls}written to {outcome.out_dir}")
    if fail_under is not None:
        _check_rate(outcome.pipeline, summary, fail_under)


def _check_rate(pipeline: Any, summary: dict[str, Any], fail_under: float) -> None:
    from runner.engine.selection import pass_rule
    rule = pass_rule(pipeline)
    if rule is None:
        typer.echo("--fail-under: this pipeline's summary has no rates to check", err=True)
        raise typer.Exit(2)
    rate = summary.get(rule[0])
    if rate is None or rate < fail_under:
        typer.echo(f"{rule[0]} {rate} is below --fail-under {fail_under} (rates run 0-1)", err=True)
        raise typer.Exit(1)
    typer.echo(f"{rule[0]} {rate} meets --fail-under {fail_under}", err=True)


@app.command()
def render(pipeline: Annotated[Path, typer.Argument(help="Pipeline file.")],
           input: InputOpt = None, record: RecordOpt = None, set_: SetOpt = None, model: ModelOpt = None,
           item: Annotated[int | None, typer.Option("--item", help="Only item N (1-based).", min=1)] = None,
           limit: Annotated[int | None, typer.Option(help="Only the first N items.", min=1)] = None,
           cache_dir: CacheOpt = None) -> None:
    """Dry run: print every prompt the LLM steps would send; sends nothing."""
    from runner.api import ItemSource, render_pipeline
    from runner.engine.context import RunOptions
    render_pipeline(pipeline, ItemSource(input, record or [], limit), RunOptions(cache_dir=_cache_dir(cache_dir)),
                    sys.stdout, _overrides(set_, model), item)


@app.command("list")
def list_pipelines(folder: Annotated[Path, typer.Argument(help="Folder of pipelines.")] = Path("pipelines")) -> None:
    """The pipelines under pipelines/ with their descriptions."""
    import yaml
    files = sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml"))
    if not files:
        typer.echo(f"no pipelines in {folder}/", err=True)
        raise typer.Exit(2)
    for file in files:
        try:
            data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
            description = data.get("description", "") if isinstance(data, dict) else ""
        except yaml.YAMLError:
            description = "(invalid YAML: run `runner validate`)"
        typer.echo(f"{file}: {' '.join(str(description).split())}")


@app.command()
def steps() -> None:
    """The step types, their arguments (from their schemas) and the fields of their results."""
    from runner.engine.steps.base import step_info, step_names
    from runner.pipeline.result_shapes import ShapeContext, describe
    for name in step_names():
        info = step_info(name)
        typer.echo(f"{name}: {info.summary}")
        schema = info.schema
        required = set(schema.get("required", []))
        for arg, spec in (schema.get("properties") or {}).items():
            kind = spec.get("type") or ("template" if "$ref" in spec or "anyOf" in spec else "any")
            note = spec.get("description", "")
            typer.echo(f"    {arg}{' (required)' if arg in required else ''}: {kind}{'  ' + note if note else ''}")
        typer.echo(f"  result: {describe(info.result_schema({}, ShapeContext()))}")


@app.command()
def feedback(store: Annotated[Path, typer.Option("--store", help="Folder (or file) of the memo store.")],
             trace_id: Annotated[str, typer.Option("--trace-id", help="The result's trace_id (or mlflow_trace_id).")],
             up: Annotated[bool, typer.Option("--up", help="The result was right.")] = False,
             down: Annotated[bool, typer.Option("--down", help="The result was wrong.")] = False,
             rationale: Annotated[str | None, typer.Option("--rationale", help="Why.")] = None,
             user: Annotated[str | None, typer.Option("--user", help="Who (default: the OS user).")] = None,
             name: Annotated[str, typer.Option("--name", help="The assessment's name in MLflow.")] = "human_feedback",
             ) -> None:
    """Record human feedback on a stored result: appends to feedback.jsonl beside the store, and logs a
    HUMAN assessment on the result's MLflow trace when it has one (to $MLFLOW_TRACKING_URI)."""
    from runner.tracing.feedback import record_feedback
    if up == down:
        typer.echo("give exactly one of --up or --down", err=True)
        raise typer.Exit(2)
    entry = record_feedback(store, trace_id, up, rationale, user, name,
                            warn=lambda message: typer.echo(f"warning: {message}", err=True))
    where = " and to MLflow" if entry.get("mlflow_assessment_id") else ""
    typer.echo(f"feedback recorded for {entry['trace_id']} ({'up' if up else 'down'}){where}")


app.command()(cli_tools.diff)
app.add_typer(cli_tools.cache_app, name="cache")

from runner.cli.calibration import register as _register_calibration  # noqa: E402 - needs `app` defined above

_register_calibration(app, _cache_dir)


def main() -> None:
    app()


def entry() -> None:
    """The `runner` command: main(), then exit without the interpreter's teardown, which
    spends up to seconds collecting the objects of big libraries (litellm above all);
    every file is written and closed by then (bench/exit_time.py)."""
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
