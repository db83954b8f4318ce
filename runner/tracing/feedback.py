"""Human feedback on a judged result: `runner feedback --store DIR --trace-id ID --up|--down
[--label VERDICT]`.

The result is found by its trace id (ours or MLflow's) in the run folders at or below DIR
(the newest run that has it); the feedback is a review in the one review store
(REPORTS_DIR/reviews.sqlite, runner/stores/reviews.py), which `runner view` and
`runner serve` write too and `runner labels export` reads, made by the same rule
(`review_of`: a label that contradicts the rating, or is not one of the pipeline's verdicts,
is refused). It is also logged to MLflow as a HUMAN assessment when the result was traced
there (it has an `mlflow_trace_id`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runner.errors import InputError, RunnerError
from runner.runs.folders import RESULTS, is_run, iter_results, read_summary
from runner.runs.manifest import read_manifest
from runner.stores.reviews import REVIEWS_FILE, ReviewStore, review_of

_DEPTHS = ("", "*/", "*/*/", "*/*/*/")        # a run folder, its group, its pipeline, the reports folder


def record_feedback(store: Path, trace_id: str, is_positive: bool, rationale: str | None = None,
                    user: str | None = None, name: str = "human_feedback", label: str | None = None,
                    reports: Path = Path("reports"),
                    warn: Callable[[str], None] = lambda message: None) -> dict[str, Any]:
    """Save the review of the result with that trace id in REPORTS/reviews.sqlite, then log it
    on the result's MLflow trace; the review, with `mlflow_assessment_id` when logged."""
    folder, result = _find(store, trace_id)
    summary = read_summary(folder)
    entry = (read_manifest(folder) or {}).get("pipeline") or {}       # both read type-checked by their schemas
    pipeline = str(summary.get("pipeline") or entry.get("name") or "")
    key = result.get("item_key")
    if not pipeline or not isinstance(key, str) or not key:
        raise InputError(f"{folder / RESULTS}: the result with trace id '{trace_id}' has no item_key or pipeline "
                         "(made by an older runner): run it again to give feedback on it")
    judged = result.get(summary["count_by"]) if summary.get("count_by") else None
    try:        # the run as `runner view` names it (under REPORTS_DIR), else as found
        run = folder.resolve().relative_to(reports.resolve()).as_posix()
    except ValueError:
        run = str(folder)
    mlflow_trace = result.get("mlflow_trace_id")
    review = review_of(pipeline, key, None if judged is None else str(judged), is_positive, label=label,
                       rationale=rationale, reviewer=user, verdicts=entry.get("verdicts"),
                       run=run, item_index=result.get("index"),
                       trace_id=mlflow_trace if isinstance(mlflow_trace, str) else None)
    reviews = ReviewStore(reports / REVIEWS_FILE)
    try:
        saved = reviews.put(review).as_dict()
    finally:
        reviews.close()
    saved["store"] = str(reviews.path)
    saved["result_trace_id"] = result.get("trace_id", trace_id)
    if review.trace_id:
        saved["mlflow_assessment_id"], problem = human_assessment(review.trace_id, is_positive, review.rationale,
                                                                  review.reviewer, name)
        if problem:
            warn(problem)
    return saved


def _find(store: Path, trace_id: str) -> tuple[Path, dict[str, Any]]:
    """The newest run folder at or below `store` (a file: its folder) holding a result with
    that trace id, and the result."""
    if not store.exists():
        raise RunnerError(f"{store}: no such file or folder")
    top = store if store.is_dir() else store.parent
    runs = sorted({p.parent for depth in _DEPTHS for p in top.glob(depth + RESULTS) if is_run(p.parent)},
                  key=lambda folder: (folder / RESULTS).stat().st_mtime, reverse=True)
    unreadable: list[str] = []
    for folder in runs:
        try:
            for result in iter_results(folder):
                if trace_id in (result.get("trace_id"), result.get("mlflow_trace_id")):
                    return folder, result
        except InputError as exc:     # a damaged results file: the other runs are still looked in
            unreadable.append(str(exc))
    raise RunnerError(f"unknown trace id '{trace_id}': no stored result in {top} has it "
                      f"({len(runs)} run folder(s) looked in"
                      + (f"; {len(unreadable)} not readable: {unreadable[0]}" if unreadable else "") + ")")


def human_assessment(trace_id: str, is_positive: bool, rationale: str | None, user: str,
                     name: str = "human_feedback") -> tuple[str | None, str | None]:
    """A HUMAN assessment on an MLflow trace, at the server MLFLOW_TRACKING_URI names:
    (its id, None), or (None, why it was not logged). Never raises: the feedback is kept
    elsewhere whatever MLflow says."""
    from runner.redact import redact, remember_url, strip_credentials
    from runner.tracing.mlflow_backend import URI_VAR, log_human_feedback
    uri = os.environ.get(URI_VAR)
    remember_url(uri or "")
    if not uri:
        return None, f"not logged to MLflow: set {URI_VAR} to the server that holds trace {trace_id}"
    try:
        return log_human_feedback(uri, trace_id, name, is_positive, rationale, user), None
    except Exception as exc:  # the caller keeps the feedback whatever MLflow says
        problem = " ".join(str(exc).split())[:300]
        return None, redact(f"not logged to MLflow at {strip_credentials(uri)}: {problem}")
