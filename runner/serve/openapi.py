"""The OpenAPI document of `runner serve` as the server really answers (/openapi.json, /docs):
the bodies of its routes (pydantic models), then the document.

FastAPI documents a client's mistake as 422; this server answers 400 with `{"error": ...}`
(runner/serve/http.py), so the document says that on every operation, with the guard's
statuses (400, 401, 413) and the bearer token as a security scheme (optional without one)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.routing import Match, Route

from runner.fileio import MAX_DEPTH, too_deep

Source = Literal["store", "cache", "judged", "error"]
JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]


class ErrorBody(BaseModel):
    error: str = Field(description="What is wrong, and where.")


class JudgeRequest(BaseModel):
    """One input record (`item`) or several (`items`), in the shape the pipeline's input reads
    (with `explode`, a record gives one item per element of that list); `params` sets the
    params the pipeline declares under params_schema, nothing else."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"oneOf": [{"required": ["item"]},
                                                                          {"required": ["items"]}]})
    item: Any = Field(None, description="One record.")
    items: list[Any] | None = Field(None, description="Several records.")
    params: dict[str, Any] | None = Field(None, description="Values of the pipeline's declared params.")

    @model_validator(mode="before")
    @classmethod
    def not_too_deep(cls, value: Any) -> Any:
        if too_deep(value):
            raise ValueError(f"JSON nested too deeply (more than {MAX_DEPTH} levels)")
        return value

    @model_validator(mode="after")
    def one_of(self) -> JudgeRequest:
        given = {"item", "items"} & self.model_fields_set
        if len(given) != 1:
            raise ValueError("give either `item` (one record) or `items` (a list of records)")
        return self

    def records(self) -> list[Any]:
        return [self.item] if "item" in self.model_fields_set else list(self.items or [])


class JobRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[Any] = Field(description="The records to judge (at least one: none is 400, no items).",
                             json_schema_extra={"minItems": 1})
    params: dict[str, Any] | None = None


class JudgedItem(BaseModel):
    index: int = Field(description="The item's place in this request (1-based, after explode).")
    item_key: str = Field(description="The item's content key: GET /v1/results/{item_key} and feedback use it.")
    source: Source = Field(description="store: a result stored before; cache: judged now, every LLM call "
                                       "answered from the cache; judged: judged now; error: the item errored "
                                       "(its result's `error` says why; counted under `errors`, never stored).")
    pipeline_hash: str
    trace_id: str | None = Field(None, description="The MLflow trace of the judgment, when traced.")
    result: dict[str, Any]


class JudgeResponse(BaseModel):
    pipeline: str
    pipeline_hash: str = Field(description="Hash of the pipeline as judged (its content, params, prompts, models).")
    counts: dict[str, int] = Field(description="Items by source: judged, errors (source error), store, cache.")
    results: list[JudgedItem]


class JobView(BaseModel):
    id: str
    pipeline: str
    params: dict[str, Any]
    status: JobStatus
    created_at: str
    started_at: str | None
    ended_at: str | None
    input: str
    input_name: str | None = Field(None, description="The uploaded file's name, as its items' errors say it.")
    run: str | None = Field(description="The run folder (relative to the project): `runner view` shows it.")
    items: int | None
    pipeline_hash: str | None
    counts: dict[str, int] = Field(description="done, errors, and where results came from: resumed (written "
                                               "before a restart), store, judged.")
    progress: float
    resumed: int
    error: str | None


class StoredView(BaseModel):
    pipeline: str
    pipeline_hash: str
    item_key: str
    stored_at: str
    trace_id: str | None
    result: dict[str, Any]


class FeedbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rating: Literal["up", "down"] = Field(description="up: the verdict is right; down: it is wrong.")
    label: str | None = Field(None, max_length=200, description=(
        "The right verdict: with `down`, another than the judged one; with `up`, only the judged one. A label "
        "that contradicts the rating, or is not one of the pipeline's verdicts, is refused (400, with the reason)."))
    rationale: str | None = Field(None, max_length=5000)
    user: str = Field(min_length=1, max_length=100, description="Who reviews (one review per user and item).")


class FeedbackResponse(BaseModel):
    saved: bool
    review: dict[str, Any]
    mlflow: dict[str, Any] = Field(description="Whether it was logged as an assessment on the result's trace.")


class PipelineView(BaseModel):
    name: str
    description: str
    file: str
    pipeline_hash: str | None
    params: dict[str, Any] = Field(description="The values a request may set, as the file has them.")
    params_schema: dict[str, Any]
    input: dict[str, Any] = Field(description="The input fields the pipeline reads.")
    stored: int | None = Field(description="Results stored for it (every version), null when the store is down.")


class PipelinesResponse(BaseModel):
    pipelines: list[PipelineView]
    unavailable: dict[str, str] = Field(description="Pipeline files not served, and why.")


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    store: str
    pipelines: int
    jobs: dict[str, int]


ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}
FASTAPI_ERRORS = ("HTTPValidationError", "ValidationError")
GUARD_STATUSES = {"400": "The request is wrong (a field, the body, the Host header): `error` says what and where.",
                  "413": "The body is larger than this server takes (--max-body, or --max-upload for an upload)."}


def install(app: FastAPI, token: bool) -> None:
    """Serve the document below as app.openapi() (made at its first request)."""
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document(app, token)
        return app.openapi_schema
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
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)
            if method not in ("get", "head", "options"):
                responses.setdefault("403", {"description": "Sent by a web page of another site (its Origin or "
                                                            "Sec-Fetch-Site): refused.",
                                             "content": {"application/json": {"schema": ERROR_REF}}})
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
    methods = {method for route in app.router.routes
               if isinstance(route, Route) and route.methods and "OPTIONS" not in route.methods
               and route.matches({"type": "http", "path": path, "method": "GET"})[0] != Match.NONE
               for method in route.methods}
    return sorted(methods | {"OPTIONS"}) if methods else []
