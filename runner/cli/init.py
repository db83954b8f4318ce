"""New judges in a project, and what to run next: `runner init NAME` writes one ready to
validate, render and run, and `runner import openai-evals FILE` brings an OpenAI eval's graders
in as a pipeline (runner/pipeline/openai_evals.py).

`runner init` writes a pipeline (CSV input, one param declared once, one model seat, one `llm`
step, a verdict from the answer's score, a pass rate), its prompt, its answer schema, five
example items and their labels: the files of runner/cli/templates/init/, `__NAME__` in them
replaced by the judge's name. Nothing is written when one of the files already exists."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runner.cli.base import RunnerApp
from runner.errors import RunnerError

import_app = RunnerApp(no_args_is_help=True, help="Bring judges from other tools into this project.")

TEMPLATES = Path(__file__).resolve().parent / "templates" / "init"
# Where each template goes in the project.
FILES = {"pipeline.yaml": "pipelines/{name}.yaml", "prompt.j2": "prompts/{name}.j2",
         "schema.json": "schemas/{name}.schema.json", "items.csv": "examples/{name}/items.csv",
         "labels.csv": "examples/{name}/labels.csv"}


def init(name: Annotated[str, typer.Argument(help="The judge's name (lowercase letters, digits and _).")]) -> None:
    """Scaffold a judge here: pipeline, prompt, answer schema, 5 example items and their labels."""
    from runner.pipeline.files import PIPELINE_NAME, write_new_files
    from runner.runs.folders import group_name
    if not PIPELINE_NAME.match(name):
        raise RunnerError(f"runner init {name}: a judge's name is lowercase letters, digits and _, starting with a "
                          f"letter (e.g. answer_judge)")
    files = {where.format(name=name): (TEMPLATES / template).read_text(encoding="utf-8").replace("__NAME__", name)
             for template, where in FILES.items()}
    write_new_files(Path.cwd(), files, "runner init", "name")
    for relative in files:
        typer.echo(f"created {relative}")
    pipeline, items = f"pipelines/{name}.yaml", f"examples/{name}/items.csv"
    runs = f"reports/{name}/{group_name(Path(items), [], Path.cwd())}"      # where `runner run` writes
    # What to run next, in order: check, look at the prompts, run, score the run against the labels.
    _echo_next([f"runner validate {pipeline}",
                f"runner render {pipeline} --input {items} --item 1",
                f"runner run {pipeline} --input {items} --model judge=openai/local-model@http://localhost:1234/v1",
                f"runner eval {runs} --labels examples/{name}/labels.csv --key id --truth label"])
    typer.echo("(without --model the judge is openai/gpt-4o-mini, which needs OPENAI_API_KEY; "
               "--model judge=PROVIDER/MODEL[@URL] points it at any other)")


def _echo_next(commands: list[str]) -> None:
    typer.echo("next:")
    for command in commands:
        typer.echo(f"  {command}")


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
        typer.echo(f"created {out / relative}")
    for left in imported.skipped:
        typer.echo(f"skipped {left} (--skip)")
    pipeline = out / "pipelines" / f"{imported.name}.yaml"         # Path(".") / "pipelines" is "pipelines"
    repoint = "".join(f" --model {seat}=openai/local-model@http://localhost:1234/v1" for seat in imported.models)
    _echo_next([f"runner validate {pipeline}", f"runner render {pipeline} --input rows.jsonl --item 1",
                f"runner run {pipeline} --input rows.jsonl{repoint}"])
    if imported.models:
        typer.echo("(without --model each grader's model is the one the eval names (a cosine grader's: "
                   "openai/text-embedding-3-small), on OpenAI with OPENAI_API_KEY; "
                   "--model GRADER=PROVIDER/MODEL[@URL] points it at any other)")

