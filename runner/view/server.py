"""Serving `runner view` with uvicorn (imported here only: no other command pays for it)."""

from __future__ import annotations

import socket
import threading
import webbrowser
from collections.abc import Callable
from pathlib import Path

from runner.errors import InputError
from runner.view.app import LOOPBACK, create_app


def allowed_hosts(host: str) -> list[str]:
    """The Host names a request may carry: loopback names, and the bound address."""
    if host in ("0.0.0.0", "::", ""):
        return ["*"]
    return list(dict.fromkeys([*LOOPBACK, host, f"[{host}]" if ":" in host else host]))


def serve(reports: Path, host: str, port: int, open_browser: bool, say: Callable[[str], None]) -> None:
    import uvicorn
    if not reports.is_dir():
        raise InputError(f"{reports}: no such folder of runs (give the REPORTS_DIR that `runner run` wrote)")
    check_port(host, port)
    if host not in LOOPBACK:
        say(f"warning: serving on {host}: anyone who can reach it can read every run under {reports}")
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else (f"[{host}]" if ":" in host else host)
    url = f"http://{shown}:{port}/"
    server = uvicorn.Server(uvicorn.Config(create_app(reports, allowed_hosts(host)), host=host, port=port,
                                           log_level="warning", access_log=False, lifespan="off"))
    if open_browser:
        threading.Timer(1.0, webbrowser.open, [url]).start()
    say(f"runner view: {url} (the runs under {reports}; Ctrl-C stops)")
    server.run()


def check_port(host: str, port: int) -> None:
    """InputError (exit 2) naming the address when it cannot be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise InputError(f"cannot serve on {host}:{port} ({exc.strerror or exc}): choose another --port") \
                from None
