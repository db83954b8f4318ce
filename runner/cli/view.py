"""The web apps and what they keep: `runner view` (reviewing verdicts in a browser), `runner
serve` (the pipelines of a folder as an HTTP service) and `runner labels export` (the reviews as
labels for `runner eval` and `runner sweep`)."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Annotated, Any

import typer

from runner.cli.base import CacheDirOpt, ModelOpt, PortOpt, RunnerApp, SetOpt, overrides_of
from runner.errors import InputError
from runner.redact import redact

labels_app = RunnerApp(no_args_is_help=True, help="Labels made by reviewers in `runner view`.")
ReportsArg = Annotated[Path, typer.Argument(help="The folder of runs (what `runner run` writes under).")]


def view(reports_dir: ReportsArg = Path("reports"),
         host: Annotated[str, typer.Option("--host", help="Address to serve on (a non-loopback one is "
                                                          "reachable by others: a warning says so).")] = "127.0.0.1",
         port: PortOpt = 8765,
         open_browser: Annotated[bool, typer.Option("--open", help="Open the page in a browser.")] = False,
         allow_host: Annotated[list[str] | None, typer.Option(
             "--allow-host", help="Another name requests may give this server by (a DNS name or proxy in front of "
                                  "it); repeatable. Loopback names and this machine's are always taken.")] = None,
         ) -> None:
    """Browse runs in a browser: items, votes, prompts and answers; compare runs; review verdicts
    (stored in REPORTS_DIR/reviews.sqlite)."""
    from runner.view.app import serve
    serve(reports_dir, host, port, open_browser, lambda line: typer.echo(line, err=True), allow_host or [])


def serve(pipelines_dir: Annotated[Path, typer.Argument(help="The folder of pipelines to serve (every "
                                                             "pipeline file directly in it).")] = Path("pipelines"),
          host: Annotated[str, typer.Option("--host", help="Address to serve on; any but loopback needs "
                                                           "--token-file.")] = "127.0.0.1",
          port: PortOpt = 8000,
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
    from runner.serve.server import serve as start
    start(pipelines_dir, host, port, db, token_file, cache_dir, concurrency, trace, max_items, max_body, max_upload,
          overrides_of(set_, model), lambda line: typer.echo(line, err=True))


@labels_app.command("export")
def export(reports_dir: ReportsArg = Path("reports"),
           pipeline: Annotated[str, typer.Option("--pipeline", help="The pipeline whose reviews to export.")] = "",
           out: Annotated[Path | None, typer.Option("--out", help="Labels file to write (JSONL; default: "
                                                                  "stdout).")] = None,
           db: Annotated[str | None, typer.Option("--db", help="The PostgreSQL database (postgresql://...) `runner "
                                                               "serve --db` keeps its results and feedback in, "
                                                               "instead of REPORTS_DIR/reviews.sqlite.")] = None,
           ) -> None:
    """The reviews of a pipeline as labels: one JSON line per reviewed item (item_key, label,
    reviewers, ...), for `runner eval --labels FILE --key item_key --truth label`."""
    from runner.calibration.labels import labels_from_reviews
    from runner.fileio import atomic_write, dumps
    from runner.stores.reviews import REVIEWS_FILE, ReviewStore
    with closing(_postgres_reviews(db) if db else ReviewStore(reports_dir / REVIEWS_FILE, create=False)) as store:
        if not pipeline:
            raise InputError(f"give --pipeline NAME (reviewed: {', '.join(store.pipelines()) or 'none yet'})")
        exported = labels_from_reviews(store, pipeline)
    text = "".join(dumps(row) + "\n" for row in exported.labels)
    if out is None:
        typer.echo(text, nl=False)
    else:
        atomic_write(out, text)
    left = [f"{n} {what}" for n, what in ((exported.no_label, "item(s) marked wrong with no right value given"),
                                          (exported.ties, "item(s) whose reviewers are split evenly")) if n]
    typer.echo(f"{len(exported.labels)} label(s) of {pipeline}{' to ' + str(out) if out else ''}"
               + (f"; left out: {', '.join(left)}" if left else ""), err=True)


def _postgres_reviews(url: str) -> Any:
    """The reviews `runner serve` keeps beside its results in PostgreSQL."""
    from runner.stores.database import is_postgres
    from runner.stores.result_store import ResultStore
    from runner.stores.reviews import ReviewStore
    if not is_postgres(url):
        raise InputError(f"--db {redact(url)}: give a PostgreSQL URL (postgresql://USER@HOST:PORT/DB); the reviews of "
                         "`runner view` and of a server on SQLite are in REPORTS_DIR/reviews.sqlite")
    return ReviewStore.beside(ResultStore.postgres(url), owns=True)
