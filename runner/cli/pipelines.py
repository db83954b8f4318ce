"""`runner validate`, `runner list`, `runner steps` and `runner params`: commands about pipeline files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runner.cli.base import PipelineArg, SetOpt, fail
from runner.errors import RunnerError
from runner.redact import redact


def validate(pipelines: Annotated[list[Path], typer.Argument(help="Pipeline files.")],
             set_: SetOpt = None) -> None:
    """Check pipeline files: schema, references, templates, models. Exit 0 or 2."""
    from runner.checks.semantics import null_vote_warnings
    from runner.pipeline.loader import load_pipeline
    failed = False
    for path in pipelines:
        try:
            pipeline = load_pipeline(path, set_ or [])
            typer.echo(f"{path}: ok ({len(pipeline.steps)} steps)")
            for warning in null_vote_warnings(pipeline):
                typer.echo(f"warning: {warning}", err=True)
        except RunnerError as exc:
            typer.echo(redact(str(exc)), err=True)
            failed = True
    raise typer.Exit(2 if failed else 0)


def list_pipelines(folder: Annotated[Path, typer.Argument(help="Folder of pipelines.")] = Path("pipelines")) -> None:
    """The pipelines under pipelines/ with their descriptions."""
    import yaml

    from runner.yamlpos import load_value
    files = sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml"))
    if not files:
        fail(f"no pipelines in {folder}/")
    for file in files:
        try:
            data = load_value(file.read_text(encoding="utf-8")) or {}
            description = data.get("description", "") if isinstance(data, dict) else ""
        except (yaml.YAMLError, RecursionError, OSError, UnicodeDecodeError):
            description = "(not a readable YAML file: run `runner validate`)"
        typer.echo(f"{file}: {' '.join(str(description).split())}")


def steps(name: Annotated[str | None, typer.Argument(help="Only this step type (e.g. jury).")] = None,
          pipeline: Annotated[Path | None, typer.Option(
              "--pipeline", "-p", help="Also the step types of this pipeline's plugins (installed plugins are "
                                       "always listed).")] = None) -> None:
    """The step types (or one), their arguments and sub-fields (from their schemas), the fields
    of their results, and an example."""
    from runner.checks.result_shapes import ShapeContext, describe
    from runner.docgen.arguments import arguments, example_step
    from runner.pipeline.step_catalog import step_info, step_names
    if pipeline is not None:
        from runner.pipeline.loader import load_pipeline
        load_pipeline(pipeline)          # imports the plugins it names
    if name is not None and name not in step_names():
        from runner.errors import unknown
        raise RunnerError(unknown("step type", name, step_names()))
    for step in [name] if name is not None else step_names():
        info = step_info(step)
        typer.echo(f"{step}: {info.summary}")
        for arg in arguments(info.schema):
            default = f" (default {arg.default})" if arg.default is not None else ""
            note = f"  {arg.description}" if arg.description else ""
            typer.echo(f"    {arg.name}{' (required)' if arg.required else ''}: {arg.kind}{default}{note}")
            for value, what in arg.choices:
                if what:
                    typer.echo(f"        {value}: {what}")
        typer.echo(f"  result: {describe(info.result_schema({}, ShapeContext()))}")
        typer.echo(f"  example: {example_step(step, info.schema)}")


def params(pipeline: PipelineArg) -> None:
    """The pipeline's params: name, type, default, range and description (set one with --set params.NAME=VALUE)."""
    from runner.pipeline.loader import load_pipeline
    from runner.pipeline.params import param_rows
    loaded = load_pipeline(pipeline)
    rows = [("name", "type", "default", "range", "description"), *param_rows(loaded.params, loaded.params_schema)]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    for row in rows:
        typer.echo("  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[4]])
                   .rstrip())
