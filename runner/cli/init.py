"""`runner init NAME`: scaffold a judge in the current project and say what to run next."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def init(name: Annotated[str, typer.Argument(help="The judge's name (lowercase letters, digits and _).")]) -> None:
    """Scaffold a judge here: pipeline, prompt, answer schema, 5 example items and their labels."""
    from runner.cli.scaffold import scaffold
    for relative in scaffold(Path.cwd(), name):
        typer.echo(f"created {relative}")
    typer.echo("next:")
    for command in next_commands(name):
        typer.echo(f"  {command}")
    typer.echo("(without --model the judge is openai/gpt-4o-mini, which needs OPENAI_API_KEY; "
               "--model judge=PROVIDER/MODEL[@URL] points it at any other)")


def next_commands(name: str) -> list[str]:
    """What to run next, in order: check, look at the prompts, run, score the run against the labels."""
    from runner.runs.folders import group_name
    pipeline, items = f"pipelines/{name}.yaml", f"examples/{name}/items.csv"
    runs = f"reports/{name}/{group_name(Path(items), [], Path.cwd())}"      # where `runner run` writes
    return [f"runner validate {pipeline}",
            f"runner render {pipeline} --input {items} --item 1",
            f"runner run {pipeline} --input {items} --model judge=openai/local-model@http://localhost:1234/v1",
            f"runner eval {runs} --labels examples/{name}/labels.csv --key id --truth label"]
