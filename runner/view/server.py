"""Serving `runner view` with uvicorn (imported here only: no other command pays for it)."""

from __future__ import annotations

import contextlib
import socket
import threading
import webbrowser
from collections.abc import Callable, Iterable
from pathlib import Path

from runner.errors import InputError
from runner.view.app import LOOPBACK, create_app

WILDCARDS = ("0.0.0.0", "::", "")
# Where a connection out to the world would leave from: connecting a UDP socket sends nothing.
_PROBES = ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1"))


def machine_names() -> list[str]:
    """The names and addresses another machine may reach this one by: its host name, its fully
    qualified name, the addresses they resolve to, and the address it reaches the network from."""
    names = {socket.gethostname(), socket.getfqdn()}
    for name in list(names):
        with contextlib.suppress(OSError):
            names.update(str(info[4][0]) for info in socket.getaddrinfo(name, None))
    for family, probe in _PROBES:
        with contextlib.suppress(OSError), socket.socket(family, socket.SOCK_DGRAM) as udp:
            udp.connect((probe, 9))
            names.add(str(udp.getsockname()[0]))
    return sorted(name for name in names if name)


def allowed_hosts(host: str, extra: Iterable[str] = ()) -> list[str]:
    """The Host names a request may carry: loopback names, the bound address (for a wildcard
    bind, this machine's names and addresses) and those given with --allow-host. Any other
    is refused: a DNS-rebinding page sends its own name."""
    names = [*LOOPBACK, *(machine_names() if host in WILDCARDS else [host]), *extra]
    return list(dict.fromkeys((f"[{name}]" if ":" in name and not name.startswith("[") else name).lower()
                              for name in names))


def serve(reports: Path, host: str, port: int, open_browser: bool, say: Callable[[str], None],
          allow_hosts: Iterable[str] = ()) -> None:
    import uvicorn
    if not reports.is_dir():
        raise InputError(f"{reports}: no such folder of runs (give the REPORTS_DIR that `runner run` wrote)")
    check_port(host, port)
    hosts = allowed_hosts(host, allow_hosts)
    if host not in LOOPBACK:
        say(f"warning: serving on {host}:{port}: anyone who can reach this machine on that port can read every "
            f"run under {reports} (items, inputs, prompts, answers, reviews) and save reviews; requests must "
            f"name one of {', '.join(hosts)} (add another with --allow-host NAME)")
    shown = "127.0.0.1" if host in WILDCARDS else (f"[{host}]" if ":" in host else host)
    url = f"http://{shown}:{port}/"
    server = uvicorn.Server(uvicorn.Config(create_app(reports, hosts), host=host, port=port,
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
