"""What the CLI's command modules share: options used by several commands, and what they print of a run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

PipelineArg = Annotated[Path, typer.Argument(help="Pipeline file.")]
InputOpt = Annotated[Path | None, typer.Option(
    "--input", "-i", help="Input file (adapter set by the pipeline); - reads standard input.")]
InputFormatOpt = Annotated[str | None, typer.Option(
    "--input-format", help="Read --input with this input adapter instead of the pipeline's (e.g. csv or jsonl "
                           "for --input -); the pipeline's input.with options apply only to its own adapter.")]
RecordOpt = Annotated[list[str] | None, typer.Option("--record", help="KEY=VALUE of one ad-hoc item (repeat).")]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="Override any pipeline key: a.b.c=VALUE (YAML).")]
ModelOpt = Annotated[list[str] | None, typer.Option(
    "--model", help="Judge with this model: NAME=provider/model[@api_base] points the pipeline's model NAME "
                    "there and seats it, e.g. judge=openai/gpt-4o-mini (repeat for more).")]
CacheDirOpt = Annotated[Path | None, typer.Option("--cache-dir",
                                                  help="LLM cache folder (default cache/ or $RUNNER_CACHE_DIR).")]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Do not read the cache (still writes).")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")]
PortOpt = Annotated[int, typer.Option("--port", help="Port to serve on.", min=1, max=65535)]


def cache_dir_of(value: Path | None) -> Path:
    return value or Path(os.environ.get("RUNNER_CACHE_DIR", "cache"))


def overrides_of(sets: list[str] | None, models: list[str] | None) -> list[str]:
    """--set assignments, then each --model as the loader's `--model NAME=...` text."""
    from runner.pipeline.overrides import MODEL_FLAG
    return [*(sets or []), *(MODEL_FLAG + text for text in models or [])]


def echo_run_notes(summary: dict[str, Any]) -> None:
    """A run's hints, warnings, summary expressions that could not be computed (summary.json's
    summary_errors) and error lines, on stderr."""
    from runner.engine.health import error_lines
    for note in [*summary.get("hints", []), *(f"warning: {w}" for w in summary.get("run_warnings", [])),
                 *(f"summary: {problem}" for problem in summary.get("summary_errors", [])),
                 *error_lines(summary)]:
        typer.echo(note, err=True)
