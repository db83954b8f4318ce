"""What the CLI's command modules share: the cache folder option and the error exit."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from runner.errors import RunnerError
from runner.redact import redact

CacheDirOpt = Annotated[Path | None, typer.Option("--cache-dir",
                                                  help="LLM cache folder (default cache/ or $RUNNER_CACHE_DIR).")]


def cache_dir_of(value: Path | None) -> Path:
    return value or Path(os.environ.get("RUNNER_CACHE_DIR", "cache"))


def fail(exc: RunnerError) -> None:
    """A user-fixable error: its message on stderr, its exit code (2), no traceback."""
    typer.echo(redact(str(exc)), err=True)
    raise typer.Exit(exc.exit_code)
