"""`runner view`: a local web app over the run folders under REPORTS_DIR.

Read-only on runs (their indexes live in REPORTS_DIR/.runner-view/); the one thing it writes
is a review, into REPORTS_DIR/reviews.sqlite, and only with the session's token, which is
in the pages it serves (a page of another site cannot read it, so cannot post a review).
Requests for another Host are refused (a DNS-rebinding page would carry its own name).
Handlers are plain functions: Starlette runs them in its thread pool, SQLite and all. Pages are
server-rendered Jinja templates (runner/view/templates/) in an environment that escapes every
value. Served with uvicorn, imported only by `serve`: no other command pays for it."""

from __future__ import annotations

import contextlib
import hmac
import json
import secrets
import socket
import threading
import webbrowser
from collections.abc import Callable, Iterable
from datetime import datetime
from functools import cache, cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from runner.engine.rates import rate_text
from runner.errors import InputError, RunnerError
from runner.fileio import decode, parse_json
from runner.llm.calls.record import header
from runner.outputs.report_format import index_of
from runner.outputs.report_view import build_item, call_view, status_of, trace_url_of
from runner.stores.database import StoreUnavailable
from runner.stores.reviews import REVIEWS_FILE, ReviewRefused, ReviewStore, os_user
from runner.tracing.feedback import record_review
from runner.view.index import LARGEST, NO_VERDICT, Query, Row, RunIndex
from runner.view.run_list import RunEntry, first_text, list_runs, run_entry, run_folder, run_pass_check

MAX_BODY = 64 * 1024
MAX_CALL = 256 * 1024      # characters of a call's prompt, and of its answer, shown
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
SOURCE_FIELDS = ("text_found", "cited_text", "source_text", "source")


class View:
    """One server's state: where the runs are, the session token, open indexes, the review store."""

    def __init__(self, reports: Path, token: str | None = None):
        self.reports = reports
        self.token = token or secrets.token_urlsafe(24)
        self._indexes: dict[Path, RunIndex] = {}

    @cached_property
    def store(self) -> ReviewStore:
        return ReviewStore(self.reports / REVIEWS_FILE)

    def open(self, run: str) -> tuple[Path, RunEntry, RunIndex]:
        """The run a request names (its path under REPORTS_DIR): its folder, entry and index."""
        folder = run_folder(self.reports, run)
        entry = run_entry(self.reports, folder)
        if folder not in self._indexes:
            self._indexes[folder] = RunIndex(self.reports, folder, entry.verdict_field, entry.report_columns,
                                             run_pass_check(entry), entry.reason_field)
        return folder, entry, self._indexes[folder]

    def page(self, template: str, code: int = 200, **values: Any) -> HTMLResponse:
        nonce = secrets.token_urlsafe(12)
        return self.html(environment().get_template(template).render(
            token=self.token, nonce=nonce, reports=str(self.reports), **values), nonce, code)

    @staticmethod
    def html(body: str, nonce: str = "", code: int = 200) -> HTMLResponse:
        """A page with the view's headers: scripts only with `nonce` (none at all without one)."""
        scripts = f"'nonce-{nonce}'" if nonce else "'none'"
        return HTMLResponse(body, code, headers={
            "Content-Security-Policy": f"default-src 'none'; style-src 'unsafe-inline'; script-src {scripts}; "
                                       "connect-src 'self'; img-src 'self' data:; form-action 'self'; "
                                       "frame-ancestors 'none'; base-uri 'none'",
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"})


def create_app(reports: Path, allowed_hosts: list[str] | None = None, token: str | None = None) -> Starlette:
    view = View(reports, token)

    def runs(request: Request) -> Response:
        return view.page("runs.html", runs=list_runs(view.reports))

    def run(request: Request) -> Response:
        folder, entry, index = view.open(request.path_params["run"])
        query = _query(request)
        page = index.page(query)
        reviews = view.store.for_items(entry.pipeline, [row.item_key for row in page.rows if row.item_key])
        rows = [{**vars(row), "status": status_of("" if row.verdict == NO_VERDICT else row.verdict, row.error or "",
                                                  row.passed),
                 "href": _item_href(entry, row), "reviews": reviews.get(row.item_key, [])} for row in page.rows]
        params = dict(request.query_params)

        def link(**changes: Any) -> str:
            return urlencode({k: v for k, v in {**params, **changes}.items() if v not in (None, "")})
        return view.page("run.html", run=entry, page=page, rows=rows, query=query, link=link,
                         counts=index.counts(), agreement=index.agreement(view.store.path, entry.pipeline),
                         align=_align_report(folder) is not None)

    def item(request: Request) -> Response:
        _, entry, index_db = view.open(request.path_params["run"])
        number = int(request.path_params["index"])
        line = request.query_params.get("line")
        found = index_db.item(number, _number(line)) if line is None or _number(line) else None
        if found is None:
            return view.page("message.html", 404, title="No such item",
                             message=f"{entry.path} has no item {str(number)[:30]}"
                                     f"{f' on results line {line[:30]}' if line else ''}.")
        row, result = found
        calls = index_db.calls(number)
        shown = build_item(result, entry.report_columns or [], entry.verdict_field, row.passed,
                           {index_of(result): [call_view(call, MAX_CALL) for call in calls]},    # as it reads them
                           trace_url_of(entry.summary))
        key = str(result.get("item_key") or "")
        previous, following = index_db.neighbours(row)
        return view.page(
            "item.html", run=entry, index=number, line=row.line, verdict=index_db.verdict_of(result),
            status=shown.status, verdict_field=entry.verdict_field, item_key=key, juries=shown.juries,
            counts=index_db.counts(),
            result_json=json.dumps(result, ensure_ascii=False, indent=2, default=str),
            quote=first_text(result, ("quote",)), source=first_text(result, SOURCE_FIELDS),
            calls=[(shown_call, header(call)) for shown_call, call in zip(shown.calls, calls, strict=True)],
            previous=previous and (previous.index, _item_href(entry, previous)),
            following=following and (following.index, _item_href(entry, following)),
            reviews=view.store.for_items(entry.pipeline, [key]).get(key, []) if key else [],
            reviewer=os_user(), trace_id=result.get("mlflow_trace_id"),
            trace_link=shown.links.get("mlflow_trace_id"))

    def compare(request: Request) -> Response:
        from runner.calibration.diff import diff_runs, only_in, overview
        chosen = request.query_params.getlist("run") or [request.query_params.get("a", ""),
                                                          request.query_params.get("b", "")]
        if len(chosen) != 2 or not all(chosen):
            return view.page("message.html", 400, title="Compare two runs",
                             message="Tick exactly two runs on the runs page to compare them.")
        folders = sorted((run_folder(view.reports, c) for c in chosen),
                         key=lambda f: run_entry(view.reports, f).started)
        before, after = (f.relative_to(view.reports).as_posix() for f in folders)
        try:
            diff = diff_runs(folders[0], folders[1], [], force=request.query_params.get("force") == "1")
        except RunnerError as refused:          # the page shows why, and a link to compare anyway
            return view.page("compare.html", before=before, after=after, diff=None, refused=str(refused))
        keys = list(dict.fromkeys([*diff["counts"]["before"], *diff["counts"]["after"]]))
        return view.page("compare.html", before=before, after=after, diff=diff, refused=None, count_keys=keys,
                         overview=overview(diff), only_in=only_in(diff))

    async def review(request: Request) -> Response:
        if not hmac.compare_digest(request.headers.get("x-runner-token", ""), view.token):
            return JSONResponse({"error": "missing or wrong session token: reload the page"}, 403)
        if "application/json" not in request.headers.get("content-type", ""):
            return JSONResponse({"error": "send JSON"}, 415)
        body = await request.body()
        if len(body) > MAX_BODY:
            return JSONResponse({"error": f"a review is at most {MAX_BODY} bytes"}, 413)
        from starlette.concurrency import run_in_threadpool
        return await run_in_threadpool(_save_review, view, body)

    def written_report(request: Request, kind: str) -> Response:
        """A report a command wrote beside the run, as it wrote it (inline style and SVG, no script):
        a probe run's probe.html, or the align.html of the `runner align` whose run this is."""
        folder = run_folder(view.reports, request.path_params["run"])
        report = _align_report(folder) if kind == "align" else folder / "probe.html"
        if report is None or not report.is_file():
            name = folder.relative_to(view.reports).as_posix()
            return view.page("message.html", 404, title=f"No {kind} report", message=(
                f"{name} is not a run of `runner align`." if kind == "align"
                else f"{name} has no probe.html: `runner probe` writes one when its run ends."))
        return view.html(report.read_text(encoding="utf-8", errors="replace"))

    def not_found(request: Request, exc: Exception) -> Response:
        if isinstance(exc, StoreUnavailable):       # reviews.sqlite locked or unreadable: not a missing page
            return view.page("message.html", 503, title="Unavailable", message=str(exc))
        return view.page("message.html", 404, title="Not found", message=str(exc))

    routes = [Route("/", runs), Route("/compare", compare), Route("/api/review", review, methods=["POST"]),
              Route("/run/{run:path}/item/{index:int}", item),
              Route("/run/{run:path}/probe", lambda request: written_report(request, "probe")),
              Route("/run/{run:path}/align", lambda request: written_report(request, "align")),
              Route("/run/{run:path}", run)]
    hosts = allowed_hosts or list(LOOPBACK)
    return Starlette(routes=routes, middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=hosts)],
                     exception_handlers={RunnerError: not_found})


def _save_review(view: View, body: bytes) -> Response:
    try:       # a lone surrogate read as U+FFFD, NaN and a key given twice refused, as everywhere
        data = parse_json(decode(body, "the review"), "the review", strict=True)
    except InputError as exc:
        return JSONResponse({"error": str(exc)}, 400)
    if not isinstance(data, dict) or not isinstance(data.get("agrees"), bool) \
            or not _number(data.get("index")) or not isinstance(data.get("run"), str) \
            or not (data.get("line") is None or _number(data.get("line"))):
        return JSONResponse({"error": "give run, index (and the results line when two share it) and agrees "
                                      "(true or false)"}, 400)
    texts = {name: data.get(name) for name in ("correct", "rationale", "reviewer")}
    if any(v is not None and not isinstance(v, str) for v in texts.values()):
        return JSONResponse({"error": "correct, rationale and reviewer are text"}, 400)
    try:
        _, entry, index = view.open(data["run"])
    except RunnerError as exc:        # no such run: the page's request is answered in JSON, as the others
        return JSONResponse({"error": str(exc)}, 404)
    found = index.item(data["index"], data.get("line"))
    if found is None:
        return JSONResponse({"error": f"{entry.path} has no item {data['index']}"}, 404)
    result = found[1]
    key = result.get("item_key")
    if not isinstance(key, str) or not key:
        return JSONResponse({"error": "this run's results carry no item_key (made by an older runner): run it "
                                      "again to review it"}, 409)
    try:
        done = record_review(view.store, result, entry.pipeline, key, index.verdict_of(result), data["agrees"],
                             label=texts["correct"], rationale=texts["rationale"], reviewer=texts["reviewer"],
                             verdicts=entry.verdicts, run=entry.path, item_index=data["index"])
    except ReviewRefused as refused:
        return JSONResponse({"error": str(refused)}, 400)
    # mlflow: a HUMAN assessment was logged on the item's trace, as `runner feedback` logs one
    answer: dict[str, Any] = {"saved": True, "review": done.review.as_dict(),
                              "mlflow": bool(done.review.trace_id) and done.warning is None}
    if done.warning:
        answer["warning"] = done.warning
    return JSONResponse(answer)


def _query(request: Request) -> Query:
    params = request.query_params
    return Query(verdict=params.get("verdict") or None, errors_only=params.get("errors") == "1",
                 field=params.get("field") or None, value=params.get("value") or None,
                 search=params.get("q") or None, sort=params.get("sort") or "index",
                 descending=params.get("desc") == "1", page=_number(params.get("page", "1")) or 1)


def _number(value: Any) -> int | None:
    """A whole number from 1 as given in a request (text of ASCII digits, or JSON's), at most
    SQLite's largest (a longer one is that: a page past the last is the last); None otherwise."""
    if isinstance(value, str):
        if not (value.isascii() and value.isdigit()):
            return None
        value = int(value[:19])
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        return None
    return min(value, LARGEST)


def _item_href(entry: RunEntry, row: Row) -> str:
    """An item's page; the results line too when another result has the same index."""
    return f"/run/{entry.path}/item/{row.index}" + (f"?line={row.line}" if row.shared else "")


def _align_report(folder: Path) -> Path | None:
    """align.html of the `runner align` that made this run (it keeps its runs in runs/), or None."""
    report = folder.parent.parent / "align.html"
    return report if folder.parent.name == "runs" and report.is_file() else None


def _when(value: Any) -> str:
    """2026-11-24T06:36:45+00:00 -> 2026-11-24 06:36 UTC."""
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    return moment.strftime("%Y-%m-%d %H:%M") + (" UTC" if moment.utcoffset() is not None else "")


def _seconds(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "-"
    return f"{value:.1f} s" if value < 120 else f"{value / 60:.1f} min"


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("runner.view", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(when=_when, seconds=_seconds, show=_show,
                       # a rate with what it is over: `71.4% (5/7; 1 left out: 1 errored)`, `n/a (0 judged)`
                       rate=lambda entry: rate_text(entry, percent=True) if isinstance(entry, dict) else "-",
                       money=lambda value: f"${value:.4f}" if isinstance(value, (int, float)) and value else "-")
    return env


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
