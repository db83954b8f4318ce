"""Human feedback on a stored result: `runner feedback --store DIR --trace-id ID --up|--down`.

Always appended to feedback.jsonl beside the store; also logged to MLflow as a HUMAN
assessment when the result was traced there (it has an `mlflow_trace_id`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runner.errors import RunnerError
from runner.fileio import dumps
from runner.redact import redact, remember_url
from runner.stores.memo import MemoStore, find_store
from runner.stores.reviews import os_user


def record_feedback(store: Path, trace_id: str, is_positive: bool, rationale: str | None = None,
                    user: str | None = None, name: str = "human_feedback",
                    warn: Callable[[str], None] = lambda message: None) -> dict[str, Any]:
    """Append one feedback entry, linked to the stored result with that trace id (ours or MLflow's)."""
    path = find_store(store)
    memo = MemoStore(path)
    try:
        return _record(memo, path, trace_id, is_positive, rationale, user, name, warn)
    finally:
        memo.save()


def _record(memo: MemoStore, path: Path, trace_id: str, is_positive: bool, rationale: str | None,
            user: str | None, name: str, warn: Callable[[str], None]) -> dict[str, Any]:
    for content_hash, result in memo.items():
        if isinstance(result, dict) and trace_id in (result.get("trace_id"), result.get("mlflow_trace_id")):
            entry = {"trace_id": result.get("trace_id", trace_id), "content_hash": content_hash,
                     "is_positive": is_positive, "rationale": rationale, "user": user or os_user(),
                     "timestamp": datetime.now(UTC).isoformat(timespec="seconds")}
            if result.get("mlflow_trace_id"):
                entry["mlflow_trace_id"] = result["mlflow_trace_id"]
                entry["mlflow_assessment_id"], problem = human_assessment(
                    result["mlflow_trace_id"], is_positive, rationale, entry["user"], name)
                if problem:
                    warn(problem)
            with (path.parent / "feedback.jsonl").open("a", encoding="utf-8") as handle:
                handle.write(dumps(entry) + "\n")
            return entry
    raise RunnerError(f"unknown trace id '{trace_id}': no stored result in {memo.path} has it "
                      f"({len(memo)} stored result(s))")


def human_assessment(trace_id: str, is_positive: bool, rationale: str | None, user: str,
                     name: str = "human_feedback") -> tuple[str | None, str | None]:
    """A HUMAN assessment on an MLflow trace, at the server MLFLOW_TRACKING_URI names:
    (its id, None), or (None, why it was not logged). Never raises: the feedback is kept
    elsewhere whatever MLflow says."""
    from runner.tracing.mlflow_backend import URI_VAR, log_human_feedback, public_uri
    uri = os.environ.get(URI_VAR)
    remember_url(uri or "")
    if not uri:
        return None, f"not logged to MLflow: set {URI_VAR} to the server that holds trace {trace_id}"
    try:
        return log_human_feedback(uri, trace_id, name, is_positive, rationale, user), None
    except Exception as exc:  # the caller keeps the feedback whatever MLflow says
        return None, redact(f"not logged to MLflow at {public_uri(uri)}: {' '.join(str(exc).split())[:300]}")
