"""Starting `runner serve`: the checks before it binds (a token for any address but
loopback, a free port, a folder of pipelines), then uvicorn in this process."""

from __future__ import annotations

import gc
import ipaddress
import os
import socket
from collections.abc import Callable
from pathlib import Path

from runner.errors import InputError
from runner.llm.cache.store import JsonCache
from runner.serve.app import DEFAULT_DB, check_store, create_app
from runner.serve.http import Limits, bearer_token
from runner.serve.judging import Settings
from runner.serve.served_pipelines import Catalog
from runner.stores.database import is_postgres, shown_url
from runner.tracing import check_trace
from runner.view.app import LOOPBACK, allowed_hosts, check_port


def is_loopback(host: str) -> bool:
    """The names and addresses a bind takes as this machine's own, exactly as written: no
    spelling a resolver might send elsewhere (`localhost.`) spares the token."""
    if host in LOOPBACK:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_overrides(folder: Path, cache_dir: Path, overrides: list[str]) -> None:
    """--set and --model refused (InputError) where they break a pipeline that loads without them, as runs do."""
    if not overrides:
        return
    broken = Catalog(folder, cache_dir, overrides).problems
    if broken:
        before = Catalog(folder, cache_dir).problems
        refused = [f"{name}: {problem}" for name, problem in broken.items() if name not in before]
        if refused:
            raise InputError("\n".join(refused))


def serve(pipelines_dir: Path, host: str, port: int, db: str | None, token_file: Path | None,
          cache_dir: Path | None, concurrency: int | None, trace: str | None, max_items: int, max_body: int,
          max_upload: int, overrides: list[str], say: Callable[[str], None]) -> None:
    """Everything checked before binding (the folder, the token, --db, --set and --model, the
    port), then uvicorn in the project folder (relative paths in the pipelines are read from there)."""
    folder = pipelines_dir.resolve()
    if not folder.is_dir():
        raise InputError(f"{pipelines_dir}: no such folder of pipelines")
    check_trace(trace)
    token = None
    if token_file is not None:
        try:
            token = bearer_token(token_file.read_text(encoding="utf-8"))
        except OSError as exc:
            raise InputError(f"--token-file {token_file}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise InputError(f"--token-file {token_file}: not UTF-8 text (a token is one line of text)") from None
    if token is None and not is_loopback(host):
        raise InputError(f"--host {host} is reachable from other machines: give --token-file FILE (a "
                         "secret every request sends as `Authorization: Bearer TOKEN`), or serve on 127.0.0.1")
    root = folder.parent
    cache = (cache_dir or Path(os.environ.get("RUNNER_CACHE_DIR") or root / "cache")).resolve()
    if db and "://" not in db and not is_postgres(db):
        db = str(Path(db).resolve())            # an SQLite file named from where the command ran
    check_store(db, root / DEFAULT_DB)
    JsonCache(cache / "responses").close()      # CacheUnusable (exit 2) now, not a 400 on every request
    check_overrides(folder, cache, overrides)
    check_port(host, port)
    settings = Settings(root=root, cache_dir=cache, concurrency=concurrency or 8,
                        concurrency_given=concurrency is not None, trace=trace, max_items=max_items)
    limits = Limits(max_body, max_upload, token, allowed_hosts(host) if is_loopback(host) else None)
    import uvicorn
    os.chdir(root)
    app = create_app(settings, folder, db, limits, overrides)
    shown = f"[{host}]" if ":" in host else host
    store = shown_url(db) if db else str(root / DEFAULT_DB)
    say(f"runner serve: http://{shown}:{port}/ (the pipelines in {folder}; results in {store}; "
        f"docs at /docs; Ctrl-C stops)")

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            """What exists now (the app, its modules) lives as long as the server: frozen out of
            the garbage collector's full passes, which then walk only what requests made."""
            gc.collect()
            gc.freeze()
            await super().startup(sockets)

    Server(uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="on")).run()
