"""`runner serve`: the pipelines of a folder as an HTTP service."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runner.cli.common import CacheDirOpt, ModelOpt, SetOpt, overrides_of


def serve(pipelines_dir: Annotated[Path, typer.Argument(help="The folder of pipelines to serve (every "
                                                             "pipeline file directly in it).")] = Path("pipelines"),
          host: Annotated[str, typer.Option("--host", help="Address to serve on; any but loopback needs "
                                                           "--token-file.")] = "127.0.0.1",
          port: Annotated[int, typer.Option("--port", help="Port to serve on.", min=1, max=65535)] = 8000,
          db: Annotated[str | None, typer.Option("--db", help="Where results are stored: postgresql://USER@HOST/DB "
                                                              "(or libpq's \"host=H dbname=DB ...\"), "
                                                              "or an SQLite file (default: results.sqlite beside "
                                                              "PIPELINES_DIR).")] = None,
          token_file: Annotated[Path | None, typer.Option("--token-file", help="A file holding the token every "
                                                                               "request must send (Authorization: "
                                                                               "Bearer TOKEN).")] = None,
          cache_dir: CacheDirOpt = None,
          concurrency: Annotated[int | None, typer.Option(help="LLM requests in flight per served pipeline (default "
                                                               "8), as `runner run --concurrency`.", min=1)] = None,
          trace: Annotated[str | None, typer.Option("--trace", help="mlflow: trace every judgment to MLflow "
                                                                    "(MLFLOW_TRACKING_URI).")] = None,
          max_items: Annotated[int, typer.Option("--max-items", help="Items one judge request may hold.",
                                                 min=1)] = 100,
          max_body: Annotated[int, typer.Option("--max-body", help="Bytes a JSON request may hold.",
                                                min=1024)] = 8 * 2**20,
          max_upload: Annotated[int, typer.Option("--max-upload", help="Bytes a job's uploaded file may hold.",
                                                  min=1024)] = 256 * 2**20,
          set_: SetOpt = None, model: ModelOpt = None) -> None:
    """Serve the pipelines over HTTP (FastAPI): judge on request or in jobs, results stored by content
    hash, feedback into the reviews `runner view` reads. OpenAPI at /docs. --set and --model apply
    to every served pipeline, as they do for `runner run`."""
    from runner.serve.server import ServeOptions
    from runner.serve.server import serve as start
    start(ServeOptions(pipelines_dir, host, port, db, token_file, cache_dir, concurrency, trace, max_items, max_body,
                       max_upload, overrides_of(set_, model)), lambda line: typer.echo(line, err=True))
