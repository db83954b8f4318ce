"""`runner feedback`, `runner diff`, `runner calls` and `runner cache ...`: commands around
finished runs and the cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from runner.cli.base import CacheDirOpt, RunnerApp, cache_dir_of, fail
from runner.errors import RunnerError
from runner.redact import redact

cache_app = RunnerApp(no_args_is_help=True, help="Look into and trim the LLM answer cache.")


def feedback(store: Annotated[Path, typer.Option("--store", help="A run folder, or a folder of runs (the newest "
                                                                   "run holding the trace id is taken).")],
             trace_id: Annotated[str, typer.Option("--trace-id", help="The result's trace_id (or mlflow_trace_id).")],
             up: Annotated[bool, typer.Option("--up", help="The result was right.")] = False,
             down: Annotated[bool, typer.Option("--down", help="The result was wrong.")] = False,
             label: Annotated[str | None, typer.Option("--label", help="The right verdict (with --down; with --up "
                                                                       "it can only be the judged one).")] = None,
             rationale: Annotated[str | None, typer.Option("--rationale", help="Why.")] = None,
             user: Annotated[str | None, typer.Option("--user", help="Who (default: the OS user).")] = None,
             name: Annotated[str, typer.Option("--name", help="The assessment's name in MLflow.")] = "human_feedback",
             reports: Annotated[Path, typer.Option("--reports", help="The folder of runs whose reviews.sqlite keeps "
                                                                     "the review (as `runner view` reads it).")]
             = Path("reports"),
             ) -> None:
    """Record human feedback on a judged result: a review in REPORTS/reviews.sqlite (the store `runner view`
    and `runner serve` write and `runner labels export` reads), and a HUMAN assessment on the result's MLflow
    trace when it has one (to $MLFLOW_TRACKING_URI). A label that contradicts --up/--down, or that is not one
    of the pipeline's verdicts, is refused (exit 2)."""
    from runner.tracing.feedback import record_feedback
    if up == down:
        fail("give exactly one of --up or --down")
    saved = record_feedback(store, trace_id, up, rationale, user, name, label, reports,
                            warn=lambda message: typer.echo(f"warning: {redact(message)}", err=True))
    where = " and to MLflow" if saved.get("mlflow_assessment_id") else ""
    typer.echo(f"feedback recorded for {saved['result_trace_id']} ({'up' if up else 'down'}){where}")


def diff(run_a: Annotated[Path | None, typer.Argument(help="The earlier run (folder, or its group for the latest).")]
         = None,
         run_b: Annotated[Path | None, typer.Argument(help="The later run.")] = None,
         field: Annotated[list[str] | None, typer.Option("--field", help="Also compare this result field "
                                                                          "(a.b reads nested; repeat).")] = None,
         format_: Annotated[str, typer.Option(
             "--format", help="text, markdown (a pull-request comment) or json.")] = "text",
         as_json: Annotated[bool, typer.Option("--json", help="The same as --format json.")] = False,
         force: Annotated[bool, typer.Option("--force", help="Compare runs even when their inputs differ.")]
         = False,
         max_drop: Annotated[float | None, typer.Option(
             "--max-drop", min=0.0, help="Exit 1 when a summary rate fell by more than this from the earlier run "
                                         "(0.02 = 2 points): a gate against a baseline run.")] = None) -> None:
    """What changed between two runs: how they were made (run.json), counts, rates and the items that moved.

    First what differs in how they were made (--set, --model, --batch, --cache-dir,
    --concurrency, --executor, params, models, pipeline hash, prompt and schema files, input),
    then each item whose verdict (or a --field) changed, before ->
    after. Runs over different inputs are refused (exit 2) unless --force. With no run given:
    the last two complete runs of the pipeline and input that ran last."""
    from runner.calibration.diff import diff_runs, format_diff, format_markdown, pick_runs, rate_drops
    from runner.runs.folders import read_summary
    shown = "json" if as_json else format_
    if shown not in ("text", "markdown", "json"):
        raise RunnerError(f"--format {format_}: choose text, markdown or json")
    before, after = pick_runs(run_a, run_b)
    result = diff_runs(before, after, field or [], force)
    if shown == "json":
        typer.echo(json.dumps(result, ensure_ascii=False, indent=2, default=str))
    elif shown == "markdown":
        typer.echo(format_markdown(result, str(read_summary(after).get("pipeline") or after.name)), nl=False)
    else:
        for line in format_diff(result):
            typer.echo(line)
    fell = rate_drops(result, max_drop) if max_drop is not None else []
    if fell:
        fail(f"{'; '.join(fell)}: more than --max-drop {max_drop:g}", 1)


def calls(run: Annotated[Path, typer.Argument(help="The run: its folder, its group folder (the latest complete "
                                                  "run), or a `latest` file.")],
          item: Annotated[int | None, typer.Option("--item", help="Only the calls of item N.", min=1)] = None,
          model: Annotated[str | None, typer.Option("--model", help="Only the calls of this model (its name "
                                                                    "under models:).")] = None) -> None:
    """Print a run's LLM calls from its calls.jsonl: a header per call (item, step, model, cached,
    attempts), then its prompt and response, in the order the calls ended."""
    from runner.llm.calls.file import read_calls
    from runner.llm.calls.record import text_of
    from runner.runs.folders import CALLS_FILE, resolve_run
    folder = run if (run / CALLS_FILE).is_file() else resolve_run(run)     # a killed run's folder too
    path = folder / CALLS_FILE
    if not path.is_file():
        raise RunnerError(f"{folder}: no {CALLS_FILE} (the run made no LLM call, or an older runner wrote "
                          "llm_logs/ instead)")
    shown = 0
    for record in read_calls(path, None if item is None else {item}, model):
        typer.echo(("\n" if shown else "") + text_of(record), nl=False)
        shown += 1
    if not shown:
        _check_asked(folder, item, model)
        wanted = " and ".join(part for part in (f"item {item}" if item else "", f"model {model}" if model else "")
                              if part)
        typer.echo(f"{path}: no call{' of ' + wanted if wanted else ''}", err=True)


def _check_asked(folder: Path, item: int | None, model: str | None) -> None:
    """A model the run has no entry for, or an item it has no result for, is a mistake in the
    asking (exit 2, a did-you-mean), not a run that made no such call."""
    from runner.errors import unknown
    from runner.runs.folders import RUN_SCHEMA, iter_results, read_checked
    from runner.runs.manifest import MANIFEST
    models = (read_checked(folder / MANIFEST, RUN_SCHEMA) or {}).get("models")
    if model is not None and isinstance(models, dict) and model not in models:
        fail(f"--model {model}: " + unknown("model", model, models, "this run's models"))
    if item is not None and all(result["index"] != item for result in iter_results(folder)):
        fail(f"--item {item}: the run has no result for item {item}")


def _size(count: int) -> str:
    size = float(count)
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def _day(stamp: str | None) -> str:
    """2026-11-22T13:14:23+00:00 -> 2026-11-22 13:14 (UTC)."""
    return stamp[:16].replace("T", " ") if stamp else "-"


@cache_app.command("stats")
def cache_stats(cache_dir: CacheDirOpt = None,
                as_json: Annotated[bool, typer.Option("--json", help="Print the statistics as JSON.")] = False) -> None:
    """Entries, size, and per model: entries, oldest and newest answer."""
    from dataclasses import asdict

    from rich.console import Console
    from rich.table import Table

    from runner.llm.cache.store import cache_stats as compute
    stats = compute(cache_dir_of(cache_dir))
    if as_json:
        typer.echo(json.dumps(asdict(stats), indent=2))
        return
    typer.echo(f"{stats.directory}: {stats.entries} answer(s), {_size(stats.size_bytes)}, "
               f"oldest {_day(stats.oldest)}, newest {_day(stats.newest)}")
    table = Table("model", "entries", "oldest", "newest")
    for name, row in sorted(stats.models.items()):
        table.add_row(name, str(row.entries), _day(row.oldest), _day(row.newest))
    if stats.models:
        Console().print(table)


@cache_app.command("clear")
def cache_clear(cache_dir: CacheDirOpt = None,
                model: Annotated[str | None, typer.Option("--model", help="Only answers of this model "
                                                          "(as in the pipeline, e.g. gpt-4o-mini).")] = None,
                older_than: Annotated[str | None, typer.Option("--older-than", help="Only answers older than "
                                                               "this: 30d, 12h, 2w.")] = None) -> None:
    """Delete cached answers (all of them, or those matching --model and --older-than)."""
    from runner.llm.cache.store import clear_cache, parse_age
    removed = clear_cache(cache_dir_of(cache_dir), model, parse_age(older_than) if older_than else None)
    typer.echo(f"removed {removed} cached answer(s)" if removed is not None else
               f"removed the damaged cache folder {cache_dir_of(cache_dir) / 'responses'} "
               "(its answers will be asked again)")
