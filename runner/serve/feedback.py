"""Feedback on a stored result (`POST /v1/results/{item_key}/feedback`): a review in the
review store `runner view` writes (REPORTS_DIR/reviews.sqlite: `runner labels export`,
`runner eval` and the view read it), and a HUMAN assessment on the result's MLflow trace
when it has one. A review that contradicts itself is refused (400, with the reason)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.checks.checker import verdict_values
from runner.serve.errors import ApiError
from runner.serve.served_pipelines import Served
from runner.stores.database import PostgresDatabase
from runner.stores.result_store import ResultStore, StoredResult
from runner.stores.reviews import REVIEWS_FILE, ReviewRefused, ReviewStore, review_of
from runner.tracing.feedback import human_assessment


def review_store(root: Path, results: ResultStore) -> ReviewStore:
    """Where feedback goes: the results' PostgreSQL database when they are kept there, else the
    review store of the runs under the project's reports/ (the one `runner view` uses)."""
    if isinstance(results.db, PostgresDatabase):
        return ReviewStore.beside(results)
    return ReviewStore(root / "reports" / REVIEWS_FILE)


def record(store: ReviewStore, served: Served, stored: StoredResult, agrees: bool, user: str,
           label: str | None, rationale: str | None) -> dict[str, Any]:
    """Save the review (one per user and item: a second replaces the first), then log it on
    the result's MLflow trace; what was done, and why MLflow was not told when it was not."""
    result = stored.result
    field = served.pipeline.summary.count_by
    judged = result.get(field) if field else None
    trace = result.get("mlflow_trace_id")
    try:
        review = review_of(served.name, stored.item_key, None if judged is None else str(judged), agrees,
                           label=label, rationale=rationale, reviewer=user, verdicts=verdict_values(served.pipeline),
                           trace_id=trace if isinstance(trace, str) else None)
    except ReviewRefused as refused:
        raise ApiError(400, str(refused)) from None
    saved = store.put(review)
    mlflow: dict[str, Any] = {"logged": False, "trace_id": saved.trace_id}
    if saved.trace_id:
        assessment, problem = human_assessment(saved.trace_id, agrees, saved.rationale, saved.reviewer)
        mlflow.update({"logged": assessment is not None, "assessment_id": assessment})
        if problem:
            mlflow["warning"] = problem
    return {"saved": True, "review": saved.as_dict(), "mlflow": mlflow}
