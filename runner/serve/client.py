"""A small Python client of `runner serve` (httpx):

    from runner.serve.client import RunnerClient
    client = RunnerClient("http://127.0.0.1:8000")              # token="..." for a guarded server
    answer = client.judge("slide_judge", item=deck)              # each item's result, from the store or judged
    job = client.wait(client.submit("slide_judge", items=decks)["id"])
    for result in client.results(job["id"]):                     # streamed
        ...
    client.feedback(result["item_key"], "slide_judge", "down", user="ana", rationale="Q2 is 8.08M")

Each method returns the server's JSON; an error answer raises ServeError with its status and
message."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

DONE = ("succeeded", "failed", "cancelled")


class ServeError(Exception):
    """The server answered an error: `status` and its message."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class RunnerClient:
    def __init__(self, base_url: str = "http://127.0.0.1:8000", token: str | None = None, timeout: float = 600,
                 http: httpx.Client | None = None):
        """`http`: an httpx.Client to send through (e.g. FastAPI's TestClient); else one is made."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = http or httpx.Client(base_url=base_url, timeout=timeout)
        self.http.headers.update(headers)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> RunnerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _json(self, response: httpx.Response) -> Any:
        if response.status_code >= 400:
            try:
                message = response.json().get("error", response.text)
            except ValueError:
                message = response.text
            raise ServeError(response.status_code, str(message))
        return response.json()

    def health(self) -> dict[str, Any]:
        """The server's health (also when it is degraded: its store unreachable)."""
        return dict(self.http.get("/healthz").json())

    def pipelines(self) -> list[dict[str, Any]]:
        return list(self._json(self.http.get("/v1/pipelines"))["pipelines"])

    def judge(self, pipeline: str, item: Any = None, items: list[Any] | None = None,
              params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Judge one record (`item`) or several (`items`) now."""
        body: dict[str, Any] = {"items": items} if items is not None else {"item": item}
        if params:
            body["params"] = params
        return dict(self._json(self.http.post(f"/v1/pipelines/{pipeline}/judge", json=body)))

    def submit(self, pipeline: str, items: list[Any] | None = None, file: str | Path | None = None,
               params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A job over `items`, or over a JSONL or CSV `file` (uploaded); the job as queued."""
        if file is not None:
            path = Path(file)
            with path.open("rb") as handle:
                response = self.http.post(f"/v1/pipelines/{pipeline}/jobs", files={"file": (path.name, handle)},
                                          data={"params": json.dumps(params or {})})
        else:
            response = self.http.post(f"/v1/pipelines/{pipeline}/jobs", json={"items": items or [],
                                                                               "params": params or {}})
        return dict(self._json(response))

    def job(self, job_id: str) -> dict[str, Any]:
        return dict(self._json(self.http.get(f"/v1/jobs/{job_id}")))

    def wait(self, job_id: str, poll: float = 0.5, timeout: float | None = None) -> dict[str, Any]:
        """The job once it has ended (succeeded, failed or cancelled)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (job := self.job(job_id))["status"] not in DONE:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} is still {job['status']} after {timeout} s")
            time.sleep(poll)
        return job

    def results(self, job_id: str) -> Iterator[dict[str, Any]]:
        """The job's results written so far, one at a time as they stream in."""
        with self.http.stream("GET", f"/v1/jobs/{job_id}/results") as response:
            if response.status_code >= 400:
                response.read()
                self._json(response)
            for line in response.iter_lines():
                if line.strip():
                    yield json.loads(line)

    def cancel(self, job_id: str) -> dict[str, Any]:
        return dict(self._json(self.http.delete(f"/v1/jobs/{job_id}")))

    def result(self, item_key: str, pipeline: str, pipeline_hash: str | None = None) -> dict[str, Any]:
        """The stored result for that content (the pipeline as it is now, or as `pipeline_hash`)."""
        params = {"pipeline": pipeline, **({"pipeline_hash": pipeline_hash} if pipeline_hash else {})}
        return dict(self._json(self.http.get(f"/v1/results/{item_key}", params=params)))

    def feedback(self, item_key: str, pipeline: str, rating: str, user: str, label: str | None = None,
                 rationale: str | None = None, pipeline_hash: str | None = None) -> dict[str, Any]:
        """A 👍 (`up`) or 👎 (`down`) on a stored result, with the right `label` and a `rationale`."""
        params = {"pipeline": pipeline, **({"pipeline_hash": pipeline_hash} if pipeline_hash else {})}
        body = {"rating": rating, "user": user, "label": label, "rationale": rationale}
        return dict(self._json(self.http.post(f"/v1/results/{item_key}/feedback", params=params, json=body)))
