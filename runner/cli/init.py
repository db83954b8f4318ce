"""`runner init NAME`: scaffold a judge in the current project and say what to run next."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def init(name: Annotated[str, typer.Argument(help="The judge's name (lowercase letters, digits and _).")]) -> None:
    """Scaffold a judge here: pipeline, prompt, answer schema, 5 example items and their labels."""
    from runner.pipeline.scaffold import next_commands, scaffold
    for relative in scaffold(Path.cwd(), name):
        typer.echo(f"created {relative}")
    typer.echo("next:")
    for command in next_commands(name):
        typer.echo(f"  {command}")
    typer.echo("(the model: openai/gpt-4o-mini with OPENAI_API_KEY set, or any: --model judge=PROVIDER/MODEL[@URL])")
