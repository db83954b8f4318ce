"""What every request meets before a route: the token, the size of its body, and errors as
JSON. Every error is a JSON body with `error` (a message), never a traceback: a client's
mistake is 4xx, an unreachable database 503; a bug is 500 with its traceback in the
server's log only (credentials redacted)."""

from __future__ import annotations

import hmac
import re
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runner.errors import InputError, RunnerError
from runner.fileio import decode, parse_json
from runner.redact import redact
from runner.serve.openapi import allowed_methods
from runner.stores.database import StoreUnavailable

OPEN_PATHS = ("/healthz", "/openapi.json", "/docs", "/docs/oauth2-redirect")
UPLOAD_ROUTE = re.compile(r"/v1/pipelines/[^/]+/jobs")        # the one route that takes a file


class ApiError(RunnerError):
    """A client's mistake (4xx) or an unavailable part of the server (503); its message is the body's `error`."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def error(status: int, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": redact(message)}, status, headers=headers or None)


def add_error_handlers(app: FastAPI) -> None:
    async def known(request: Request, exc: Exception) -> JSONResponse:
        """ApiError its status; an unreachable database 503; any other RunnerError a user's mistake."""
        status = exc.status if isinstance(exc, ApiError) else 503 if isinstance(exc, StoreUnavailable) else 400
        return error(status, str(exc))

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        headers = dict(exc.headers or {})
        if exc.status_code == 405:          # every route at the path, not only the first one found
            allowed = allowed_methods(request.app, request.url.path)
            if not allowed:                 # only the OPTIONS route (any path) matched it
                return error(404, "Not Found")
            headers["Allow"] = ", ".join(allowed)
        if exc.status_code == 400 and isinstance(exc.__cause__, (ValueError, RecursionError)):   # JSON unread
            return error(400, await _unreadable(request))
        return error(exc.status_code, str(exc.detail), **headers)

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return error(400, invalid_fields(exc.errors()))

    async def bug(request: Request, exc: Exception) -> JSONResponse:
        sys.stderr.write(redact("".join(traceback.format_exception(exc))))
        return error(500, "internal error (the server's log has the details)")

    app.add_exception_handler(RunnerError, known)      # ApiError and StoreUnavailable too: found by their MRO
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(Exception, bug)


@dataclass
class Limits:
    max_body: int = 8 * 2**20           # bytes of a JSON request
    max_upload: int = 256 * 2**20       # bytes of a job's uploaded file
    token: str | None = None
    allowed_hosts: list[str] | None = None         # Host names a request may carry (None: any)


def _bodiless(send: Send) -> Send:
    async def without_body(message: Message) -> None:
        await send({**message, "body": b""} if message["type"] == "http.response.body" else message)
    return without_body


class Guard:
    """ASGI middleware on every route: the Host (on loopback, only loopback names), a write sent
    by a page of another site to a server without a token (a form's POST needs no CORS
    preflight), a NUL byte in the path or query, the bearer token (but on OPEN_PATHS), and the
    body size: over the limit when declared or once read that far, 413; only a job's multipart
    upload may be larger."""

    def __init__(self, app: ASGIApp, limits: Limits):
        self.app, self.token, self.max_body, self.max_upload = app, limits.token, limits.max_body, limits.max_upload
        self.hosts = None if limits.allowed_hosts is None else [host.lower() for host in limits.allowed_hosts]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in scope.get("headers", [])}
        upload = scope["method"] == "POST" and UPLOAD_ROUTE.fullmatch(scope["path"]) is not None
        limit = self.max_upload if upload and headers.get("content-type", "").startswith("multipart/") \
            else self.max_body
        refused = self._refusal(scope, headers, limit)
        if refused is not None:
            await refused(scope, receive, send)
            return
        if scope["method"] == "HEAD":       # wherever GET answers: its status and headers, no body (RFC 9110)
            scope, send = {**scope, "method": "GET"}, _bodiless(send)
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise HTTPException(413, _too_large(limit))
            return message
        await self.app(scope, counted, send)

    def _refusal(self, scope: Scope, headers: dict[str, str], limit: int) -> JSONResponse | None:
        if self.hosts is not None and _host_name(headers.get("host", "")).lower() not in self.hosts:
            # A page of another site whose name resolves to this machine (DNS rebinding) says its own name.
            return error(400, "this server answers only requests for its own address (Host header)")
        if self.token is None and scope["method"] not in ("GET", "HEAD", "OPTIONS") and _cross_site(headers):
            # A page of another site may POST a form here without the browser asking first (no CORS
            # preflight): it would spend this server's model calls. Programs send no Origin; with a
            # token, no page can send it (a header that needs a preflight), so a proxy's Host is no matter.
            return error(403, f"a request from a web page of another site (Origin: {headers.get('origin', '')[:100]}) "
                              "is refused: this server takes requests from programs and its own pages")
        if self.token is not None and scope["path"] not in OPEN_PATHS:
            scheme, _, value = headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), self.token.encode()):
                return error(401, "give the server's token: Authorization: Bearer TOKEN",
                             **{"WWW-Authenticate": "Bearer"})
        if "\x00" in scope["path"] or b"%00" in scope.get("query_string", b""):
            return error(400, "a NUL byte in the path or query: no name, key or id holds one")
        declared = headers.get("content-length", "")
        return error(413, _too_large(limit)) if declared.isdigit() and int(declared) > limit else None


async def _unreadable(request: Request) -> str:
    """What is wrong in a JSON body and where, as runner reads JSON (e.g. a number past
    Python's digit limit: FastAPI's own message names neither)."""
    try:
        parse_json(decode(await request.body(), "the body"), "the body", strict=True)
    except InputError as exc:
        return str(exc)
    return "the body cannot be read as JSON"


def invalid_fields(errors: Sequence[Any]) -> str:
    """A validation's problems as `field: what is wrong` (never the value sent: it may be a key)."""
    problems = [f"{'.'.join(str(part) for part in problem.get('loc', ()) if part != 'body') or 'body'}: "
                f"{problem.get('msg', 'invalid')}" for problem in errors[:10]]
    return "; ".join(problems) or "the request is not valid"


def _cross_site(headers: dict[str, str]) -> bool:
    """A browser's request from a page of another origin: its Sec-Fetch-Site says so, or its
    Origin (`null` from a sandboxed page or a file) is not the address the request is sent to."""
    if headers.get("sec-fetch-site", "") in ("cross-site", "same-site"):
        return True
    origin = headers.get("origin")
    return origin is not None and urlsplit(origin).netloc.lower() != headers.get("host", "").lower()


def _host_name(header: str) -> str:
    """The name in a Host header, without its port."""
    if header.startswith("["):
        return header[:header.find("]") + 1]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def _too_large(limit: int) -> str:
    return f"the request body is larger than this server takes ({limit:,} bytes)"


def bearer_token(text: str) -> str:
    """A token file's token (its first line), or RunnerError when it is unusable."""
    token = text.strip().splitlines()[0].strip() if text.strip() else ""
    if len(token) < 16:
        raise RunnerError("--token-file: the token must be at least 16 characters (e.g. `python -c \"import "
                          "secrets; print(secrets.token_urlsafe(32))\" > token`)")
    return token
