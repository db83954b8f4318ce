"""The routes of `runner serve` (FastAPI): pipelines, judging, jobs, stored results and
feedback under /v1 (a review in the store `runner view` writes, and a HUMAN assessment on the
result's MLflow trace), with /healthz, /openapi.json and /docs. Handlers stay on the event loop;
what blocks (the databases, MLflow) runs in threads."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import ValidationError

from runner.checks.checker import verdict_values
from runner.errors import InputError
from runner.fileio import decode, dumps, parse_json
from runner.redact import redact
from runner.serve import openapi
from runner.serve.http import ApiError, Guard, Limits, add_error_handlers, invalid_fields
from runner.serve.job_files import InputWriter
from runner.serve.jobs import JSON_LINES, OWN_KIND, UPLOADS, JobBoard, check_input
from runner.serve.judging import COUNTED, Judging, Settings
from runner.serve.served_pipelines import Catalog, Served
from runner.stores.database import PostgresDatabase, StoreUnavailable, is_postgres
from runner.stores.kept import without_reads
from runner.stores.result_store import ResultStore, StoredResult
from runner.stores.reviews import REVIEWS_FILE, ReviewStore
from runner.tracing.feedback import record_review

DEFAULT_DB = "results.sqlite"          # beside the pipelines folder, in the project folder
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": openapi.ErrorBody}
                                           for code in (400, 401, 404, 409, 413, 503)}


@dataclass
class Parts:
    """The server's parts, made when it starts and closed when it stops."""

    settings: Settings
    pipelines_dir: Any
    db: str | None = field(repr=False)          # a DSN may hold a password
    overrides: list[str] | None = None          # `runner serve --set/--model`, on every pipeline

    async def open(self) -> None:
        root = self.settings.root
        self.store = await asyncio.to_thread(open_result_store, self.db, root / DEFAULT_DB)
        self.catalog = Catalog(self.pipelines_dir, self.settings.cache_dir, self.overrides)
        self.judging = Judging(self.settings, self.catalog, self.store)
        self.jobs = JobBoard(root, self.judging)
        # feedback goes beside results kept in PostgreSQL, else into the review store `runner view` uses
        self.reviews = (ReviewStore.beside(self.store) if isinstance(self.store.db, PostgresDatabase)
                        else ReviewStore(root / "reports" / REVIEWS_FILE))
        await self.jobs.start()

    async def close(self) -> None:
        await self.jobs.aclose()
        await self.judging.aclose()
        self.store.close()
        self.reviews.close()


def open_result_store(url: str | None, default: Path) -> ResultStore:
    """The store at `url` (postgresql://..., libpq's `host=... dbname=...`, an SQLite file), else at `default`."""
    if url and is_postgres(url):
        return ResultStore.postgres(url)
    return ResultStore.sqlite(_sqlite_path(url, default))


def _sqlite_path(url: str | None, default: Path) -> Path:
    if url and "://" in url and not url.startswith("sqlite:///"):
        raise InputError(f"--db {url.split('://', 1)[0]}://...: give a postgresql:// URL (libpq's: "
                         "postgresql://HOST/DB) or an SQLite file")
    return Path(url.removeprefix("sqlite:///")) if url else default


def check_store(url: str | None, default: Path) -> None:
    """A --db that can never work (a scheme with no store, a URL libpq cannot read, a file that is
    no SQLite database) refused (InputError); an unreachable server starts degraded and reconnects."""
    if url and is_postgres(url):
        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict
        try:
            conninfo_to_dict(url)
        except ProgrammingError as exc:
            raise InputError(redact(f"--db {url}: {' '.join(str(exc).split())}")) from None
        return
    path = _sqlite_path(url, default)
    if not path.exists() and path.parent.is_dir():
        return                  # a new file: made when the server starts, not by a start refused later
    try:
        open_result_store(url, default).close()
    except StoreUnavailable as exc:
        raise InputError(f"--db: {exc}") from None


def record(store: ReviewStore, served: Served, stored: StoredResult, agrees: bool, user: str,
           label: str | None, rationale: str | None) -> dict[str, Any]:
    """Save the review (one per user and item: a second replaces the first; one refused is a
    400), then log it on the result's MLflow trace; what was done, and why MLflow was not told."""
    field = served.pipeline.summary.count_by
    done = record_review(store, stored.result, served.name, stored.item_key,
                         stored.result.get(field) if field else None, agrees, label=label, rationale=rationale,
                         reviewer=user, verdicts=verdict_values(served.pipeline))
    mlflow: dict[str, Any] = {"logged": False, "trace_id": done.review.trace_id}
    if done.review.trace_id:
        mlflow.update({"logged": done.assessment_id is not None, "assessment_id": done.assessment_id})
        if done.warning:
            mlflow["warning"] = done.warning
    return {"saved": True, "review": done.review.as_dict(), "mlflow": mlflow}


def json_response(value: Any, status: int = 200, **headers: str) -> Response:
    return Response(dumps(value), status, headers=headers or None, media_type="application/json")


def create_app(settings: Settings, pipelines: Any, db: str | None = None, limits: Limits | None = None,
               overrides: list[str] | None = None) -> FastAPI:
    """The app serving the pipelines of the folder `pipelines` from the project `settings.root`
    (relative paths in them read from there), each with the `overrides` (`--set`, `--model`)."""
    limits = limits or Limits()
    server = Parts(settings, pipelines, db, overrides)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await server.open()
        try:
            yield
        finally:
            await server.close()

    app = FastAPI(title="runner serve", version="1", lifespan=lifespan,
                  description="LLM-as-judge pipelines as a service: judge on request or in jobs, results kept by "
                              "content hash, feedback from the people who read them.")
    app.state.server = server
    add_error_handlers(app)
    app.add_middleware(Guard, limits=limits)
    openapi.install(app, token=limits.token is not None)

    @app.get("/healthz", response_model=openapi.Health, responses={503: {"model": openapi.Health}})
    async def health() -> Response:
        try:
            await asyncio.to_thread(server.store.ping)
            store, status = "ok", "ok"
        except StoreUnavailable as exc:
            store, status = f"unavailable: {exc}", "degraded"
        jobs = Counter(job.status for job in server.jobs.jobs.values())
        return json_response({"status": status, "store": store, "pipelines": len(server.catalog.served),
                              "jobs": dict(jobs)}, 200 if status == "ok" else 503)

    @app.get("/v1/pipelines", response_model=openapi.PipelinesResponse, responses=ERRORS)
    async def pipelines_list() -> Response:
        server.catalog.refresh()
        shown = []
        for name in sorted(server.catalog.served):
            variant = await server.judging.variant(name)
            try:
                stored: int | None = await asyncio.to_thread(server.store.count, name)
            except StoreUnavailable:
                stored = None
            shown.append({**variant.served.describe(), "pipeline_hash": variant.hash, "stored": stored})
        return json_response({"pipelines": shown, "unavailable": server.catalog.problems})

    @app.post("/v1/pipelines/{name}/judge", response_model=openapi.JudgeResponse, responses=ERRORS)
    async def judge(name: str, body: openapi.JudgeRequest) -> Response:
        """Judge one record or a list, synchronously: each item's result, from the store when this
        pipeline (as these params make it) judged the same content before."""
        variant = await server.judging.variant(name, body.params)
        answers = await server.judging.judge(variant, body.records())
        counts = {**dict.fromkeys(COUNTED, 0), **Counter("errors" if answer["source"] == "error"
                                                            else answer["source"] for answer in answers)}
        return json_response({"pipeline": name, "pipeline_hash": variant.hash, "counts": counts, "results": answers})

    @app.post("/v1/pipelines/{name}/jobs", status_code=202, response_model=openapi.JobView,
              responses={**ERRORS, 415: {"model": openapi.ErrorBody}},
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": openapi.JobRequest.model_json_schema()},
                  "multipart/form-data": {"schema": {"type": "object", "required": ["file"], "properties": {
                      "file": {"type": "string", "format": "binary",
                               "description": "JSON lines (.jsonl, .ndjson), CSV with a header row (.csv), "
                                              "a JSON array (.json) or a YAML list (.yaml, .yml)"},
                      "params": {"type": "object", "description": "The params (a JSON object)"}}},
                      "encoding": {"params": {"contentType": "application/json"}}}}}})
    async def submit(name: str, request: Request) -> Response:
        """A job over many records: a JSON body {items, params} or an uploaded file (JSONL, CSV, JSON, YAML).
        Answered at once (202) with the job; it runs as a run of the pipeline."""
        kind = request.headers.get("content-type", "")
        if kind.startswith("multipart/form-data"):
            params, suffix, write, shown = await _upload(request)
        elif kind.startswith("application/json"):
            try:
                body = openapi.JobRequest.model_validate(parse_json(decode(await request.body(), "the body"),
                                                                    "the body", strict=True))
            except ValidationError as exc:
                raise ApiError(400, f"not a job request: {invalid_fields(exc.errors())}") from None
            except InputError as exc:
                raise ApiError(400, f"not a job request: {' '.join(str(exc).split())[:500]}") from None
            params, suffix, shown = body.params or {}, ".jsonl", None

            def write(writer: InputWriter) -> None:
                writer.records_of(body.items)
        else:
            raise ApiError(415, "send JSON ({\"items\": [...]}) or a multipart upload with a `file` field")
        writer = InputWriter(settings.root, suffix)
        try:            # in a thread: an upload of any size never holds the event loop
            await asyncio.to_thread(write, writer)
            variant = await server.judging.variant(name, params)
            path = writer.close()
        except BaseException:
            writer.discard()
            raise
        try:
            await asyncio.to_thread(check_input, variant.pipeline, path)
            job = server.jobs.submit(name, params, path, variant.hash, shown)
        except BaseException:
            path.unlink(missing_ok=True)        # a refused upload keeps no file
            raise
        return json_response(job.view(), 202, Location=f"/v1/jobs/{job.id}")

    @app.get("/v1/jobs", response_model=list[openapi.JobView], responses=ERRORS)
    async def jobs_list() -> Response:
        return json_response([job.view() for job in sorted(server.jobs.jobs.values(), key=lambda j: j.id,
                                                           reverse=True)])

    @app.get("/v1/jobs/{job_id}", response_model=openapi.JobView, responses=ERRORS)
    async def job_status(job_id: str) -> Response:
        return json_response(server.jobs.get(job_id).view())

    @app.get("/v1/jobs/{job_id}/results", responses={**ERRORS, 200: {
        "content": {"application/x-ndjson": {}}, "description": "The results written so far, one JSON a line."}})
    async def job_results(job_id: str) -> StreamingResponse:
        """The job's results so far as JSON lines, streamed (in the order they finished while the
        job runs, in input order once it has ended)."""
        return StreamingResponse(server.jobs.results(job_id), media_type="application/x-ndjson")

    @app.delete("/v1/jobs/{job_id}", response_model=openapi.JobView, responses=ERRORS)
    async def cancel(job_id: str) -> Response:
        """Cancel a job, keeping what finished (its run is written as interrupted)."""
        return json_response((await server.jobs.cancel(job_id)).view())

    @app.get("/v1/results/{item_key}", response_model=openapi.StoredView, responses=ERRORS)
    async def stored_result(item_key: str, pipeline: str = Query(description="The pipeline's name."),
                            pipeline_hash: str | None = Query(None, description="Which version (default: the "
                                                                                "pipeline as it is now).")) -> Response:
        """The stored result for that content, under the pipeline as it is now (or as `pipeline_hash`)."""
        stored = await _stored(pipeline, item_key, pipeline_hash)
        return json_response({"pipeline": stored.pipeline, "pipeline_hash": stored.pipeline_hash,
                              "item_key": stored.item_key, "stored_at": stored.stored_at,
                              "trace_id": stored.result.get("mlflow_trace_id"), "result": without_reads(stored.result)})

    @app.post("/v1/results/{item_key}/feedback", response_model=openapi.FeedbackResponse, responses=ERRORS)
    async def feedback(item_key: str, body: openapi.FeedbackRequest,
                       pipeline: str = Query(description="The pipeline's name."),
                       pipeline_hash: str | None = Query(None)) -> Response:
        """A person's 👍/👎 on a stored result: kept with the reviews `runner view` writes (labels
        for `runner labels export` and `runner eval`), and on the result's MLflow trace."""
        stored = await _stored(pipeline, item_key, pipeline_hash)
        served = server.catalog.get(pipeline)
        answer = await asyncio.to_thread(record, server.reviews, served, stored, body.rating == "up", body.user,
                                         body.label, body.rationale)
        return json_response(answer)

    @app.options("/{path:path}", include_in_schema=False)
    async def options(path: str) -> Response:
        allowed = openapi.allowed_methods(app, "/" + path)
        if not allowed:
            raise ApiError(404, "no such route")
        return Response(status_code=204, headers={"Allow": ", ".join(allowed)})

    async def _stored(pipeline: str, item_key: str, pipeline_hash: str | None) -> Any:
        digest = pipeline_hash or (await server.judging.variant(pipeline)).hash
        stored = await asyncio.to_thread(server.store.get, pipeline, digest, item_key)
        if stored is None:
            raise ApiError(404, f"no stored result of {pipeline} (pipeline hash {digest}) for item {item_key}")
        return stored

    return app


async def _upload(request: Request) -> tuple[dict[str, Any], str, Callable[[InputWriter], None], str | None]:
    """A multipart job's `params` (a JSON object) and `file`, kept as it came: the suffix saying
    its adapter (jobs.UPLOADS by its name, CSV by its type too, else JSON lines), what copies it,
    and its name as uploaded (without folders), which its items' errors say."""
    form = await request.form(max_files=1, max_fields=4)
    upload, raw = form.get("file"), form.get("params")
    if upload is None or isinstance(upload, str):
        raise ApiError(400, "the upload has no `file` field (curl -F file=@items.jsonl)")
    try:
        params = parse_json(raw, "params", strict=True) if isinstance(raw, str) and raw.strip() else {}
    except InputError as exc:
        raise ApiError(400, f"{exc} (give a JSON object)") from None
    if not isinstance(params, dict):
        raise ApiError(400, "params: give a JSON object")
    base = (upload.filename or "").replace("\\", "/").rsplit("/", 1)[-1]       # without folders
    name = base.lower()
    suffix = next((kind for kind in UPLOADS if name.endswith(kind)), None) or (
        ".jsonl" if name.endswith(JSON_LINES) else ".csv" if (upload.content_type or "").startswith("text/csv")
        else OWN_KIND if "." in name.strip(".") else ".jsonl")

    def copy(writer: InputWriter) -> None:
        for chunk in iter(lambda: upload.file.read(1 << 16), b""):
            writer.write_bytes(chunk)
    shown = " ".join(base.split())[:200]
    return params, suffix, copy, shown or None
