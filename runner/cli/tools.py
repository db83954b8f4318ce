"""`runner diff` and `runner cache ...`: commands around runs, kept apart from cli.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from runner.cli.common import CacheDirOpt, cache_dir_of, fail
from runner.errors import RunnerError

cache_app = typer.Typer(no_args_is_help=True, help="Look into and trim the LLM answer cache.")


def diff(run_a: Annotated[Path | None, typer.Argument(help="The earlier run (folder, or its group for the latest).")]
         = None,
         run_b: Annotated[Path | None, typer.Argument(help="The later run.")] = None,
         field: Annotated[list[str] | None, typer.Option("--field", help="Also compare this result field "
                                                                          "(a.b reads nested; repeat).")] = None,
         as_json: Annotated[bool, typer.Option("--json", help="Print the diff as JSON.")] = False,
         force: Annotated[bool, typer.Option("--force", help="Compare runs even when their inputs differ.")]
         = False) -> None:
    """What changed between two runs: how they were made (run.json), counts, rates and the items that moved.

    First what differs in how they were made (--set, params, models, pipeline hash, prompt
    and schema files, input), then each item whose verdict (or a --field) changed, before ->
    after. Runs over different inputs are refused (exit 2) unless --force. With no run given:
    the last two complete runs of the pipeline and input that ran last."""
    from runner.outputs.diff import diff_runs, format_diff, pick_runs
    try:
        before, after = pick_runs(run_a, run_b)
        result = diff_runs(before, after, field or [], force)
    except RunnerError as exc:
        fail(exc)
    if as_json:
        typer.echo(json.dumps(result, ensure_ascii=False, indent=2, default=str))
    else:
        for line in format_diff(result):
            typer.echo(line)


def _size(count: int) -> str:
    size = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"  # pragma: no cover


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

    from runner.llm.cache_admin import cache_stats as compute
    try:
        stats = compute(cache_dir_of(cache_dir))
    except RunnerError as exc:
        fail(exc)
    if as_json:
        typer.echo(json.dumps(asdict(stats), indent=2))
        return
    typer.echo(f"{stats.directory}: {stats.entries} answer(s), {_size(stats.size_bytes)}, "
               f"oldest {_day(stats.oldest)}, newest {_day(stats.newest)}")
    table = Table("model", "entries", "oldest", "newest")
    for name, row in sorted(stats.models.items()):
        table.add_row(name, str(row.entries), _day(row.oldest), _day(row.newest))
    console = Console()
    if stats.models:
        console.print(table)


@cache_app.command("clear")
def cache_clear(cache_dir: CacheDirOpt = None,
                model: Annotated[str | None, typer.Option("--model", help="Only answers of this model "
                                                          "(as in the pipeline, e.g. gpt-4o-mini).")] = None,
                older_than: Annotated[str | None, typer.Option("--older-than", help="Only answers older than "
                                                               "this: 30d, 12h, 2w.")] = None) -> None:
    """Delete cached answers (all of them, or those matching --model and --older-than)."""
    from runner.llm.cache_admin import clear_cache, parse_age
    try:
        removed = clear_cache(cache_dir_of(cache_dir), model, parse_age(older_than) if older_than else None)
    except RunnerError as exc:
        fail(exc)
    typer.echo(f"removed {removed} cached answer(s)")
