"""Human feedback on a judged result: `runner feedback --store DIR --trace-id ID --up|--down
[--label VERDICT]`, the result found by its trace id (ours or MLflow's) in the newest run at
or below DIR that has it.

`record_review` gives a review the one way `runner feedback`, `runner view` and `runner serve`
do: saved in the one review store (REPORTS_DIR/reviews.sqlite, which `runner labels export`
reads), and logged to MLflow as a HUMAN assessment when the result was traced there."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.errors import InputError, RunnerError
from runner.runs.folders import RESULTS, is_run, iter_results, read_summary
from runner.runs.manifest import read_manifest
from runner.stores.reviews import REVIEWS_FILE, Review, ReviewStore, review_of

# a run folder, its group, its pipeline, the reports folder; and a run of `runner align`'s folder
# (reports/PIPELINE/align/runs/RUN)
RUN_DEPTHS = ("", "*/", "*/*/", "*/*/*/", "*/*/*/*/")


@dataclass(frozen=True)
class Recorded:
    """A review as saved, and what MLflow was told of it."""

    review: Review
    assessment_id: str | None = None        # its HUMAN assessment on the result's MLflow trace
    warning: str | None = None              # why MLflow was not told, when the result has a trace


def record_review(store: ReviewStore | Path, result: dict[str, Any], pipeline: str, item_key: str, judged: Any,
                  agrees: bool, *, label: str | None, rationale: str | None, reviewer: str | None,
                  verdicts: Sequence[str] | None, run: str | None = None, item_index: int | None = None,
                  name: str = "human_feedback") -> Recorded:
    """A person's review of `result` (judged `judged`), the one way `runner feedback`, view and
    serve give one: made by `review_of` (ReviewRefused when it contradicts itself), saved in
    `store` (a path: the SQLite store there, opened for this review), then logged as a HUMAN
    assessment on the result's MLflow trace (its `mlflow_trace_id`) when it has one."""
    trace = result.get("mlflow_trace_id")
    review = review_of(pipeline, item_key, None if judged is None else str(judged), agrees, label=label,
                       rationale=rationale, reviewer=reviewer, verdicts=verdicts, run=run, item_index=item_index,
                       trace_id=trace if isinstance(trace, str) else None)
    reviews = ReviewStore(store) if isinstance(store, Path) else store
    try:
        saved = reviews.put(review)
    finally:
        if reviews is not store:
            reviews.close()
    if not saved.trace_id:
        return Recorded(saved)
    return Recorded(saved, *human_assessment(saved.trace_id, agrees, saved.rationale, saved.reviewer, name))


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
    try:        # the run as `runner view` names it (under REPORTS_DIR), else as found
        run = folder.resolve().relative_to(reports.resolve()).as_posix()
    except ValueError:
        run = str(folder)
    done = record_review(reports / REVIEWS_FILE, result, pipeline, key,
                         result.get(summary["count_by"]) if summary.get("count_by") else None, is_positive,
                         label=label, rationale=rationale, reviewer=user, verdicts=entry.get("verdicts"), run=run,
                         item_index=result.get("index"), name=name)
    saved = {**done.review.as_dict(), "store": str(reports / REVIEWS_FILE),
             "result_trace_id": result.get("trace_id", trace_id)}
    if done.review.trace_id:
        saved["mlflow_assessment_id"] = done.assessment_id
    if done.warning:
        warn(done.warning)
    return saved


def _find(store: Path, trace_id: str) -> tuple[Path, dict[str, Any]]:
    """The newest run folder at or below `store` (a file: its folder) holding a result with
    that trace id, and the result."""
    if not store.exists():
        raise RunnerError(f"{store}: no such file or folder")
    top = store if store.is_dir() else store.parent
    runs = sorted({p.parent for depth in RUN_DEPTHS for p in top.glob(depth + RESULTS) if is_run(p.parent)},
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
