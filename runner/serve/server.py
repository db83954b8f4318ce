"""Starting `runner serve`: the checks before it binds (a token for any address but
loopback, a free port, a folder of pipelines), then uvicorn in this process."""

from __future__ import annotations

import gc
import ipaddress
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from runner.errors import InputError
from runner.serve.app import DEFAULT_DB, Limits, check_store, create_app
from runner.serve.http import bearer_token
from runner.serve.judging import Settings
from runner.serve.served_pipelines import Catalog
from runner.stores.database import is_postgres, shown_url
from runner.view.app import LOOPBACK
from runner.view.server import allowed_hosts, check_port


@dataclass
class ServeOptions:
    pipelines_dir: Path
    host: str = "127.0.0.1"
    port: int = 8000
    db: str | None = None
    token_file: Path | None = None
    cache_dir: Path | None = None
    concurrency: int | None = None
    trace: str | None = None
    max_items: int = 100
    max_body: int = Limits.max_body
    max_upload: int = Limits.max_upload
    overrides: list[str] = field(default_factory=list)     # --set and --model, as `runner run` takes them


def is_loopback(host: str) -> bool:
    if host in LOOPBACK:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def prepare(options: ServeOptions) -> tuple[Settings, Limits, Path]:
    """Everything checked before binding: the folder, the token, --db, --set and --model, the
    port; then the working folder is the project (relative paths in the pipelines are read
    from there)."""
    folder = options.pipelines_dir.resolve()
    if not folder.is_dir():
        raise InputError(f"{options.pipelines_dir}: no such folder of pipelines")
    token = None
    if options.token_file is not None:
        try:
            token = bearer_token(options.token_file.read_text(encoding="utf-8"))
        except OSError as exc:
            raise InputError(f"--token-file {options.token_file}: {exc.strerror or exc}") from None
    if token is None and not is_loopback(options.host):
        raise InputError(f"--host {options.host} is reachable from other machines: give --token-file FILE (a "
                         "secret every request sends as `Authorization: Bearer TOKEN`), or serve on 127.0.0.1")
    root = folder.parent
    cache_dir = (options.cache_dir or Path(os.environ.get("RUNNER_CACHE_DIR") or root / "cache")).resolve()
    db = options.db
    if db and "://" not in db and not is_postgres(db):
        db = str(Path(db).resolve())            # an SQLite file named from where the command ran
    options.db = db
    check_store(db, root / DEFAULT_DB)
    check_overrides(folder, cache_dir, options.overrides)
    check_port(options.host, options.port)
    settings = Settings(root=root, cache_dir=cache_dir, concurrency=options.concurrency or 8,
                        concurrency_given=options.concurrency is not None, trace=options.trace,
                        max_items=options.max_items)
    hosts = allowed_hosts(options.host) if is_loopback(options.host) else None
    return settings, Limits(options.max_body, options.max_upload, token, hosts), folder


def check_overrides(folder: Path, cache_dir: Path, overrides: list[str]) -> None:
    """--set and --model refused before the server starts (InputError) where they break a
    pipeline that loads without them, as `runner run` refuses them."""
    if not overrides:
        return
    broken = Catalog(folder, cache_dir, overrides).problems
    if broken:
        before = Catalog(folder, cache_dir).problems
        refused = [f"{name}: {problem}" for name, problem in broken.items() if name not in before]
        if refused:
            raise InputError("\n".join(refused))


def serve(options: ServeOptions, say: Callable[[str], None]) -> None:
    import uvicorn
    settings, limits, folder = prepare(options)
    os.chdir(settings.root)
    app = create_app(settings, folder, options.db, limits, options.overrides)
    shown = f"[{options.host}]" if ":" in options.host else options.host
    store = shown_url(options.db) if options.db else str(settings.root / DEFAULT_DB)
    say(f"runner serve: http://{shown}:{options.port}/ (the pipelines in {folder}; results in {store}; "
        f"docs at /docs; Ctrl-C stops)")

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            """What exists now (the app, its modules) lives as long as the server: frozen out of
            the garbage collector's full passes, which then walk only what requests made."""
            gc.collect()
            gc.freeze()
            await super().startup(sockets)

    Server(uvicorn.Config(app, host=options.host, port=options.port, log_level="warning",
                          access_log=False, lifespan="on")).run()
