"""A served project in tmp_path: pipelines, prompts, an in-process scripted model, and the
app behind FastAPI's TestClient (its lifespan: the server's start and stop)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers import scripted_model
from runner.serve.app import Limits, create_app
from runner.serve.judging import Settings
from runner.testing import ScriptedModel

VERDICT = {"type": "object", "required": ["rating", "score"],
           "properties": {"rating": {"enum": ["green", "amber", "red"]}, "score": {"type": "number"}}}

# A small slide-like judge: a deck exploded into slides, each slide one LLM call, its rating
# moved by a threshold param; the deck's source data is in every slide's prompt.
DECK_JUDGE = """
version: 1
name: deck
description: Rate each slide of a deck against its data.
input: {adapter: json, explode: slides, parent_as: deck}
params:
  green_at: {default: 80, type: number, minimum: 0, maximum: 100}
  data_root: data
models:
  judge: {model: openai/scripted, retries: 0}
steps:
  - id: ask
    uses: llm
    with:
      model: judge
      prompt: "Data: {{ deck.data }}. Slide: {{ item.html }}. Green at {{ params.green_at }}."
      output_schema: verdict.schema.json
output:
  rating: "{{ steps.ask.output.rating }}"
  score: "{{ steps.ask.output.score }}"
summary:
  count_by: rating
"""


POSTGRES_DSN = os.environ.get("RUNNER_TEST_POSTGRES_DSN")
REQUIRE_POSTGRES = bool(os.environ.get("RUNNER_REQUIRE_POSTGRES"))      # CI: run, never skip
BACKENDS = ["sqlite", "postgresql"]


def postgres_schema_url(dsn: str) -> str:
    """A fresh schema of the test server, as a URL whose connections work in it alone."""
    import psycopg
    schema = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    return f"{dsn}{'&' if '?' in dsn else '?'}options=-csearch_path%3D{schema}"


def backend_url(backend: str, root: Path) -> str:
    """Where a test's results live: an SQLite file in tmp_path, or a fresh schema of the
    PostgreSQL server RUNNER_TEST_POSTGRES_DSN names (`bash .ci/postgres start` makes one)."""
    if backend == "sqlite":
        return str(root / "results.sqlite")
    if not POSTGRES_DSN:
        if REQUIRE_POSTGRES:
            pytest.fail("RUNNER_REQUIRE_POSTGRES is set but RUNNER_TEST_POSTGRES_DSN is not")
        pytest.skip("no PostgreSQL server: eval \"$(bash .ci/postgres start)\" sets RUNNER_TEST_POSTGRES_DSN")
    return postgres_schema_url(POSTGRES_DSN)


@pytest.fixture(params=BACKENDS)
def db_url(request: Any, tmp_path: Path) -> str:
    return backend_url(request.param, tmp_path)


def gated_model(answers: int) -> tuple[ScriptedModel, dict[str, int]]:
    """The deck's scripted judge (always green) and its gate: it answers `answers` calls, then
    none until the test raises gate["open"] (a server stopped mid-job holds calls unanswered)."""
    model = scripted_model(json.dumps({"rating": "green", "score": 90}))
    gate = {"open": answers}
    original = model.complete

    async def complete(spec: Any, messages: Any, params: Any) -> Any:
        while gate["open"] <= 0:
            await asyncio.sleep(0.01)
        gate["open"] -= 1
        return await original(spec, messages, params)
    model.complete = complete        # type: ignore[method-assign]
    return model, gate


def deck(*htmls: str, data: Any = (1, 2)) -> dict[str, Any]:
    return {"deck_id": "d1", "data": list(data), "slides": [{"html": h} for h in htmls]}


class Served:
    def __init__(self, root: Path, model: ScriptedModel):
        self.root = root
        self.model = model
        self.client: Any = None
        self.db = ""

    def judge(self, *records: Any, params: dict[str, Any] | None = None, name: str = "deck") -> Any:
        body: dict[str, Any] = {"items": list(records)}
        if params is not None:
            body["params"] = params
        return self.client.post(f"/v1/pipelines/{name}/judge", json=body)


@pytest.fixture
def served_project(project: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    # the server looks for changed pipeline files at each request rather than once a second:
    # a test's edit is served by its next request
    monkeypatch.setattr("runner.serve.served_pipelines.CHECK_EVERY", 0.0)
    project.pipeline(DECK_JUDGE, "deck.yaml")
    project.schema("verdict.schema.json", VERDICT)
    return project


def make_client(root: Path, model: ScriptedModel, db: str | None = None, limits: Limits | None = None,
                **settings: Any) -> Any:
    from fastapi.testclient import TestClient
    app = create_app(Settings(root=root, cache_dir=root / "cache", transport=model, **settings), root / "pipelines",
                     db, limits)
    return TestClient(app)


@pytest.fixture
def served(served_project: Any, db_url: str) -> Iterator[Served]:
    model = scripted_model(json.dumps({"rating": "green", "score": 90}))
    serving = Served(served_project.root, model)
    serving.db = db_url
    with make_client(served_project.root, model, db_url) as client:
        serving.client = client
        yield serving


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Process:
    """`runner serve` in its own process, its stderr in a file."""

    def __init__(self, root: Path, *args: str, env: dict[str, str] | None = None):
        self.root = root
        self.port = free_port()
        self.log = root / f"serve-{self.port}.log"
        self.url = f"http://127.0.0.1:{self.port}"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "runner.cli.app", "serve", "pipelines", "--port", str(self.port), *args],
                cwd=root, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})

    def ready(self) -> Process:
        deadline = time.monotonic() + 60
        while True:
            assert self.process.poll() is None, self.log.read_text()
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code in (200, 503):
                    return self
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.1)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        self.process.wait(30)
