"""`runner import openai-evals FILE`: bring an OpenAI eval's graders into this project as a
pipeline (runner/pipeline/openai_evals.py) and say what to run next, as `runner init` does."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runner.cli.base import RunnerApp

import_app = RunnerApp(no_args_is_help=True, help="Bring judges from other tools into this project.")


@import_app.command("openai-evals")
def openai_evals(
        file: Annotated[Path, typer.Argument(help="An OpenAI eval (testing_criteria, data_source_config) or one "
                                                  "grader object, as JSON.")],
        name: Annotated[str | None, typer.Option("--name", help="The pipeline's name (default: the eval's).")] = None,
        out: Annotated[Path, typer.Option("--out", help="The project folder written into.")] = Path("."),
        skip: Annotated[list[str] | None, typer.Option(
            "--skip", help="Leave the graders of this type out and import the rest (repeatable).")] = None,
        allow_python: Annotated[bool, typer.Option(
            "--allow-python", help="Write python graders' source as plugins of this project: their code runs "
                                   "when the pipeline is validated and run.")] = False) -> None:
    """Write pipelines/NAME.yaml (and its prompts, answer schemas and plugins) from an OpenAI eval:
    it reads the Evals JSONL rows as they are and gives each grader's passed, and `passed`."""
    from runner.pipeline.openai_evals import import_openai_eval
    imported = import_openai_eval(file, out, name, tuple(skip or ()), allow_python)
    for relative in imported.files:
        typer.echo(f"created {out / relative if out != Path('.') else relative}")
    for left in imported.skipped:
        typer.echo(f"skipped {left} (--skip)")
    typer.echo("next:")
    for command in next_commands(imported.name, imported.models, out):
        typer.echo(f"  {command}")
    if imported.models:
        typer.echo("(without --model each grader's model is the one the eval names (a cosine grader's: "
                   "openai/text-embedding-3-small), on OpenAI with OPENAI_API_KEY; "
                   "--model GRADER=PROVIDER/MODEL[@URL] points it at any other)")


def next_commands(name: str, models: list[str], out: Path) -> list[str]:
    """Check it, look at the prompts of the first row, run it on the eval's JSONL rows."""
    pipeline = out / "pipelines" / f"{name}.yaml" if out != Path(".") else Path("pipelines") / f"{name}.yaml"
    repoint = "".join(f" --model {seat}=openai/local-model@http://localhost:1234/v1" for seat in models)
    return [f"runner validate {pipeline}",
            f"runner render {pipeline} --input rows.jsonl --item 1",
            f"runner run {pipeline} --input rows.jsonl{repoint}"]
