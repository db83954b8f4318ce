"""`runner init NAME`: the files of a new judge in a project, ready to validate, render and run,
and what to run next.

A pipeline (CSV input, one param declared once, one model seat, one `llm` step, a verdict
from the answer's score, a pass rate), its prompt, its answer schema, five example items and
their labels: the files of runner/cli/templates/init/, `__NAME__` in them replaced by the
judge's name. Nothing is written when one of the files already exists."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runner.errors import RunnerError

TEMPLATES = Path(__file__).resolve().parent / "templates" / "init"
# Where each template goes in the project.
FILES = {"pipeline.yaml": "pipelines/{name}.yaml", "prompt.j2": "prompts/{name}.j2",
         "schema.json": "schemas/{name}.schema.json", "items.csv": "examples/{name}/items.csv",
         "labels.csv": "examples/{name}/labels.csv"}


def init(name: Annotated[str, typer.Argument(help="The judge's name (lowercase letters, digits and _).")]) -> None:
    """Scaffold a judge here: pipeline, prompt, answer schema, 5 example items and their labels."""
    for relative in scaffold(Path.cwd(), name):
        typer.echo(f"created {relative}")
    typer.echo("next:")
    for command in next_commands(name):
        typer.echo(f"  {command}")
    typer.echo("(without --model the judge is openai/gpt-4o-mini, which needs OPENAI_API_KEY; "
               "--model judge=PROVIDER/MODEL[@URL] points it at any other)")


def scaffold_files(name: str) -> dict[str, str]:
    """Project-relative path -> text of each file `runner init NAME` writes."""
    from runner.pipeline.files import PIPELINE_NAME
    if not PIPELINE_NAME.match(name):
        raise RunnerError(f"runner init {name}: a judge's name is lowercase letters, digits and _, starting with a "
                          f"letter (e.g. answer_judge)")
    return {where.format(name=name): (TEMPLATES / template).read_text(encoding="utf-8").replace("__NAME__", name)
            for template, where in FILES.items()}


def scaffold(root: Path, name: str) -> list[str]:
    """Write the judge's files under `root`; refuse (naming the file) when any exists, before writing any."""
    from runner.fileio import atomic_write
    files = scaffold_files(name)
    for relative in files:
        if (root / relative).exists():
            raise RunnerError(f"{relative} already exists: runner init writes no file over another "
                              f"(choose another name, or move it)")
    for relative, text in files.items():
        atomic_write(root / relative, text)
    return list(files)


def next_commands(name: str) -> list[str]:
    """What to run next, in order: check, look at the prompts, run, score the run against the labels."""
    from runner.runs.folders import group_name
    pipeline, items = f"pipelines/{name}.yaml", f"examples/{name}/items.csv"
    runs = f"reports/{name}/{group_name(Path(items), [], Path.cwd())}"      # where `runner run` writes
    return [f"runner validate {pipeline}",
            f"runner render {pipeline} --input {items} --item 1",
            f"runner run {pipeline} --input {items} --model judge=openai/local-model@http://localhost:1234/v1",
            f"runner eval {runs} --labels examples/{name}/labels.csv --key id --truth label"]
