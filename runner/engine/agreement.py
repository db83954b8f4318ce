"""Juror agreement, kept for the run: each jury step's running sums over the votes behind the
run's results (an item's own, noted by the jury step, or those a result it reused kept:
runner/stores/kept.py), added once per result by the run's recorder (outputs/summary.ErrorCount),
wherever the item ran. summary.json's `juries` section is written from them."""

from __future__ import annotations

from typing import Any

from runner.engine.context import Runtime
from runner.engine.voting import Agreement, IntervalAgreement

JuryAgreement = Agreement | IntervalAgreement


def _agreements(runtime: Runtime) -> dict[str, JuryAgreement]:
    """Each jury step's agreement figures, kept as running sums over its items."""
    runtime.summary_sections["juries"] = jury_summary
    return {}


def add_votes(runtime: Runtime, noted: list[list[Any]]) -> None:
    """An item's jury votes (kept.note_votes: its own, or those a result it reused kept), added to
    the run's agreement: Krippendorff's alpha for a numeric vote, else Fleiss' kappa."""
    for step, numeric, votes in noted:
        kind = IntervalAgreement if numeric else Agreement
        runtime.resource(_agreements).setdefault(step, kind()).add(votes)


def jury_summary(runtime: Runtime) -> dict[str, Any]:
    """Per jury step, the juror agreement that fits its votes, named (`measure`)."""
    return {step: agreement.summary() for step, agreement in runtime.resource(_agreements).items()}
