"""The OpenAPI document of `runner serve` as the server really answers (/openapi.json, /docs).

FastAPI documents a client's mistake as 422 with its own error shape; this server answers
400 with `{"error": ...}` (runner/serve/http.py), so the document says that on every
operation, with the statuses the guard sends on any route (400 for a Host or a NUL byte,
401 without the token, 413 for a body over the limit), and the bearer token as a security
scheme: required when the server has a token, optional when it has none."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from starlette.routing import Match, Route

ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}
FASTAPI_ERRORS = ("HTTPValidationError", "ValidationError")
GUARD_STATUSES = {"400": "The request is wrong (a field, the body, the Host header): `error` says what and where.",
                  "413": "The body is larger than this server takes (--max-body, or --max-upload for an upload)."}


def install(app: FastAPI, token: bool) -> None:
    """Serve the document below as app.openapi()."""
    made: dict[str, Any] = {}

    def openapi() -> dict[str, Any]:
        if not made:
            made.update(document(app, token))
        return made
    app.openapi = openapi       # type: ignore[method-assign]


def document(app: FastAPI, token: bool) -> dict[str, Any]:
    spec = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    for name in FASTAPI_ERRORS:
        schemas.pop(name, None)
    spec["components"]["securitySchemes"] = {"bearer": {
        "type": "http", "scheme": "bearer",
        "description": "The token of --token-file, as `Authorization: Bearer TOKEN` (every route under /v1)."}}
    for path, operations in spec["paths"].items():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)
            for status, text in GUARD_STATUSES.items():
                responses.setdefault(status, {"description": text})
                responses[status]["content"] = {"application/json": {"schema": ERROR_REF}}
            if path.startswith("/v1/"):
                operation["security"] = [{"bearer": []}] if token else [{"bearer": []}, {}]
                responses.setdefault("401", {"description": "No token, or not the server's.",
                                             "content": {"application/json": {"schema": ERROR_REF}}})
    return spec


def allowed_methods(app: FastAPI, path: str) -> list[str]:
    """The methods the routes at `path` answer (OPTIONS and a 405's `Allow`)."""
    methods: set[str] = set()
    for route in app.router.routes:
        if isinstance(route, Route) and route.methods and "OPTIONS" not in route.methods:
            if route.matches({"type": "http", "path": path, "method": "GET"})[0] != Match.NONE:
                methods |= route.methods
    return sorted(methods | {"OPTIONS"}) if methods else []
