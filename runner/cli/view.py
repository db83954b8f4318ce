"""`runner view` and `runner labels export`: reviewing verdicts in a browser, and the reviews
as labels for `runner eval` and `runner sweep`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from runner.cli.base import RunnerApp

labels_app = RunnerApp(no_args_is_help=True, help="Labels made by reviewers in `runner view`.")
ReportsArg = Annotated[Path, typer.Argument(help="The folder of runs (what `runner run` writes under).")]


def view(reports_dir: ReportsArg = Path("reports"),
         host: Annotated[str, typer.Option("--host", help="Address to serve on (a non-loopback one is "
                                                          "reachable by others: a warning says so).")] = "127.0.0.1",
         port: Annotated[int, typer.Option("--port", help="Port to serve on.", min=1, max=65535)] = 8765,
         open_browser: Annotated[bool, typer.Option("--open", help="Open the page in a browser.")] = False,
         allow_host: Annotated[list[str] | None, typer.Option(
             "--allow-host", help="Another name requests may give this server by (a DNS name or proxy in front of "
                                  "it); repeatable. Loopback names and this machine's are always taken.")] = None,
         ) -> None:
    """Browse runs in a browser: items, votes, prompts and answers; compare runs; review verdicts
    (stored in REPORTS_DIR/reviews.sqlite)."""
    from runner.view.server import serve
    serve(reports_dir, host, port, open_browser, lambda line: typer.echo(line, err=True), allow_host or [])


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
    from runner.calibration.review_labels import labels_from_reviews
    from runner.errors import InputError
    from runner.fileio import atomic_write, dumps
    from runner.stores.reviews import REVIEWS_FILE, ReviewStore
    store = _postgres_reviews(db) if db else ReviewStore(reports_dir / REVIEWS_FILE, create=False)
    try:
        if not pipeline:
            known = store.pipelines()
            raise InputError(f"give --pipeline NAME (reviewed: {', '.join(known) or 'none yet'})")
        exported = labels_from_reviews(store, pipeline)
    finally:
        store.close()
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
    from runner.errors import InputError
    from runner.redact import redact
    from runner.stores.database import is_postgres
    from runner.stores.result_store import ResultStore
    from runner.stores.reviews import ReviewStore
    if not is_postgres(url):
        raise InputError(f"--db {redact(url)}: give a PostgreSQL URL (postgresql://USER@HOST:PORT/DB); the reviews of "
                         "`runner view` and of a server on SQLite are in REPORTS_DIR/reviews.sqlite")
    return ReviewStore.beside(ResultStore.postgres(url), owns=True)
