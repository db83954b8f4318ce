"""`runner batches`: the provider batches a run submitted and has not collected yet."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from runner.cli.base import CacheDirOpt, cache_dir_of

if TYPE_CHECKING:
    from runner.llm.batch.store import BatchRecord, BatchStore


def batches(cache_dir: CacheDirOpt = None,
            cancel: Annotated[bool, typer.Option("--cancel", help="Cancel every pending batch.")] = False,
            all_: Annotated[bool, typer.Option("--all", help="Also list finished batches.")] = False,
            key_env: Annotated[str | None, typer.Option(
                "--key-env", help="Env var holding the endpoints' API key for --cancel (OpenAI itself: "
                                  "OPENAI_API_KEY is read anyway).")] = None) -> None:
    """Pending provider batches (submitted by `runner run --batch`), from the cache folder's store;
    a run started again polls them instead of submitting again. --cancel cancels them."""
    from runner.llm.batch.store import STORE_FILE, BatchStore
    folder = cache_dir_of(cache_dir)
    if not (folder / STORE_FILE).is_file():
        typer.echo(f"no batches in {folder}")
        return
    store = BatchStore(folder)
    try:
        records = store.all(pending_only=not all_)
        if not records:
            typer.echo("no pending batches" if not all_ else "no batches")
        for record in records:
            counts = record.counts
            done = f" {counts.get('completed', 0)}/{counts.get('total', record.requests)} done" if counts else ""
            when = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%d %H:%M")
            typer.echo(f"{record.batch_id or '(not created)'}: model {record.model_name} ({record.model}) at "
                       f"{record.api_base or 'OpenAI'}: {record.status}, {record.requests} request(s){done}, "
                       f"submitted {when} UTC{': ' + record.message if record.message else ''}")
        if cancel:
            key = os.environ.get(key_env) if key_env else None
            asyncio.run(_cancel(store, [r for r in records if r.pending], key))
    finally:
        store.close()


async def _cancel(store: BatchStore, records: list[BatchRecord], key: str | None) -> None:
    """Cancel each batch; one the provider answers 404 for is gone (deleted, another
    organisation's key, a gateway restarted): forgotten, so no run waits on it again."""
    from runner.llm.batch.client import BatchClient
    from runner.llm.batch.polling import GONE
    from runner.llm.client.spec import ModelSpec
    from runner.llm.client.transport import TransportError
    failed = False
    for record in records:
        client = BatchClient(ModelSpec(record.model_name, record.model, record.api_base, api_key=key))
        try:
            batch_id = record.batch_id
            if batch_id is None:
                found = await client.find(record.submission)
                if found is None:
                    store.forget(record.submission)
                    typer.echo(f"forgot a submission of model {record.model_name} that was never created")
                    continue
                batch_id = str(found["id"])
                store.submitted(record.submission, batch_id, str(found.get("status")))
            status = str((await client.cancel(batch_id)).get("status") or "cancelling")
            store.update(record.submission, status, record.counts)
            typer.echo(f"{batch_id}: {status}")
        except TransportError as exc:
            if exc.status == GONE:
                store.forget(record.submission)
                typer.echo(f"{record.batch_id or 'a submission of model ' + record.model_name}: gone at the provider "
                           f"(HTTP {GONE}): forgotten")
                continue
            failed = True
            typer.echo(f"{record.batch_id}: not cancelled: {exc.message}", err=True)
        finally:
            await client.aclose()
    if failed:
        raise typer.Exit(1)
