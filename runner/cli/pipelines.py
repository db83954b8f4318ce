"""`runner validate`, `runner list`, `runner steps` and `runner params`: commands about pipeline files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runner.cli.common import SetOpt
from runner.errors import RunnerError
from runner.redact import redact


def validate(pipelines: Annotated[list[Path], typer.Argument(help="Pipeline files.")],
             set_: SetOpt = None) -> None:
    """Check pipeline files: schema, references, templates, models. Exit 0 or 2."""
    from runner.pipeline.loader import load_pipeline
    failed = False
    for path in pipelines:
        try:
            pipeline = load_pipeline(path, set_ or [])
            typer.echo(f"{path}: ok ({len(pipeline.steps)} steps)")
        except RunnerError as exc:
            typer.echo(redact(str(exc)), err=True)
            failed = True
    raise typer.Exit(2 if failed else 0)


def list_pipelines(folder: Annotated[Path, typer.Argument(help="Folder of pipelines.")] = Path("pipelines")) -> None:
    """The pipelines under pipelines/ with their descriptions."""
    import yaml
    files = sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml"))
    if not files:
        typer.echo(f"no pipelines in {folder}/", err=True)
        raise typer.Exit(2)
    for file in files:
        try:
            data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
            description = data.get("description", "") if isinstance(data, dict) else ""
        except yaml.YAMLError:
            description = "(invalid YAML: run `runner validate`)"
        typer.echo(f"{file}: {' '.join(str(description).split())}")


def steps(pipeline: Annotated[Path | None, typer.Argument(
        help="Also the step types of this pipeline's plugins (installed plugins are always listed).")] = None) -> None:
    """The step types, their arguments (from their schemas) and the fields of their results."""
    from runner.pipeline.catalog import step_info, step_names
    from runner.pipeline.result_shapes import ShapeContext, describe
    if pipeline is not None:
        from runner.pipeline.loader import load_pipeline
        load_pipeline(pipeline)          # imports the plugins it names
    for name in step_names():
        info = step_info(name)
        typer.echo(f"{name}: {info.summary}")
        schema = info.schema
        required = set(schema.get("required", []))
        for arg, spec in (schema.get("properties") or {}).items():
            kind = spec.get("type") or ("template" if "$ref" in spec or "anyOf" in spec else "any")
            note = spec.get("description", "")
            typer.echo(f"    {arg}{' (required)' if arg in required else ''}: {kind}{'  ' + note if note else ''}")
        typer.echo(f"  result: {describe(info.result_schema({}, ShapeContext()))}")


def params(pipeline: Annotated[Path, typer.Argument(help="Pipeline file.")]) -> None:
    """The pipeline's params: name, type, default, range and description (set one with --set params.NAME=VALUE)."""
    from runner.pipeline.loader import load_pipeline
    from runner.pipeline.params import param_rows
    loaded = load_pipeline(pipeline)
    rows = [("name", "type", "default", "range", "description"),
            *param_rows(loaded.params, loaded.params_schema)]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    for row in rows:
        typer.echo("  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[4]])
                   .rstrip())
