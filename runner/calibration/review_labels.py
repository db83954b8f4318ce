"""Reviews made in `runner view` as labels that `runner eval` and `runner sweep` read.

One label per reviewed item, joined to results by `item_key`: the right verdict the
reviewers give (the one a reviewer typed, or the judged verdict a reviewer approved). When
reviewers of one item disagree, the most given label wins; a tie, or only disapprovals that
name no right verdict, gives no label (counted, never guessed)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any

from runner.stores.reviews import Review, ReviewStore

KEY = "item_key"
TRUTH = "label"


@dataclass
class Exported:
    labels: list[dict[str, Any]] = field(default_factory=list)
    no_label: int = 0            # disapprovals that name no right verdict
    ties: int = 0                # reviewers split evenly


def labels_from_reviews(store: Path | ReviewStore, pipeline: str) -> Exported:
    """The labels of a review store (its SQLite file, or a store already open)."""
    reviews = store if isinstance(store, ReviewStore) else ReviewStore(store, create=False)
    try:
        exported = Exported()
        for key, group in groupby(reviews.of_pipeline(pipeline), key=lambda r: r.item_key):
            _add(exported, key, list(group))
        return exported
    finally:
        if reviews is not store:
            reviews.close()


def _add(exported: Exported, key: str, reviews: list[Review]) -> None:
    given = Counter(r.label for r in reviews if r.label is not None)
    if not given:
        exported.no_label += 1
        return
    ranked = given.most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        exported.ties += 1
        return
    latest = max(reviews, key=lambda r: r.reviewed_at)
    exported.labels.append({KEY: key, TRUTH: ranked[0][0], "reviewers": len(reviews),
                            "agree_with_judge": sum(r.agrees for r in reviews), "judged": latest.judged,
                            "index": latest.item_index, "run": latest.run,
                            "rationale": " | ".join(r.rationale for r in reviews if r.rationale) or None})


def label_records(store: Path, pipeline: str) -> Iterator[dict[str, Any]]:
    yield from labels_from_reviews(store, pipeline).labels
