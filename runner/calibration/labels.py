"""Human labels (JSONL, JSON or CSV, or the reviews made in `runner view`) joined to a run's
results by a key field. Nothing is dropped silently: labels without a result, results without
a label, duplicate keys on either side, unusable label rows and errored items are reported.

Reviews give one label per reviewed item (by `item_key`): the right verdict the reviewers give.
When they disagree, the most given label wins; a tie, or only disapprovals that name no right
verdict, gives no label (counted, never guessed)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass, field, fields
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.engine.rates import lookup
from runner.errors import InputError
from runner.fileio import parse_json, read_json_lines, read_text

if TYPE_CHECKING:
    from runner.stores.reviews import ReviewStore

NO_PREDICTION = "(no prediction)"


@dataclass
class LabelRow:
    line: int                  # 1-based line (JSONL, CSV) or position (JSON list)
    record: dict[str, Any]


def read_labels(path: Path, pipeline: str | None = None) -> list[LabelRow]:
    """Label rows from JSONL, JSON or CSV, or from a review store (reviews.sqlite of `runner
    view`, read for `pipeline`: rows of item_key and label, as `runner labels export` writes)."""
    if path.suffix.lower() in (".sqlite", ".db"):
        from runner.stores.reviews import ReviewStore
        if not pipeline:
            raise InputError(f"{path}: a review store holds reviews of many pipelines; the run names none")
        with closing(ReviewStore(path, create=False)) as reviews:
            labels = labels_from_reviews(reviews, pipeline).labels
        return [LabelRow(number, record) for number, record in enumerate(labels, 1)]
    if not path.is_file():
        raise InputError(f"{path}: labels file not found")
    suffix = path.suffix.lower()
    if suffix == ".csv":                # cells are text, as the csv input adapter reads them
        from runner.inputs.csv import read_csv
        csv_rows = []
        for record in read_csv(path, {}):
            if record.error:
                raise InputError(record.error)
            csv_rows.append(LabelRow(record.line or 0, record.value))
        return csv_rows
    if suffix == ".json":
        data = parse_json(read_text(path), str(path), strict=True)
        if isinstance(data, dict):
            data = data.get("labels", data.get("items"))
        if not isinstance(data, list):
            raise InputError(f"{path}: expected a list of objects (or an object with a 'labels' list)")
        rows = [LabelRow(n + 1, r) for n, r in enumerate(data)]
    else:
        rows = [LabelRow(number, record) for number, record in read_json_lines(path, strict=True)]
    bad = [row.line for row in rows if not isinstance(row.record, dict)]
    if bad:
        raise InputError(f"{path}: entries {', '.join(map(str, bad[:10]))} are not objects")
    return rows


def key_text(value: Any) -> str | None:
    """Keys compare as text, so 3 in JSON matches "3" in CSV."""
    if value is None or value == "":
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


@dataclass
class Pair:
    key: str
    truth: Any
    predicted: Any
    result: dict[str, Any]
    line: int = 0              # the label's line (or position) in its file


@dataclass
class Joined:
    pairs: list[Pair] = field(default_factory=list)
    unmatched_labels: list[str] = field(default_factory=list)     # labelled keys with no result
    unlabelled_results: list[str] = field(default_factory=list)   # result keys with no label
    duplicate_labels: dict[str, list[int]] = field(default_factory=dict)    # key -> label lines (first used)
    duplicate_results: dict[str, list[int]] = field(default_factory=dict)   # key -> result indexes (first used)
    invalid_labels: list[str] = field(default_factory=list)       # label rows without a key or a truth
    results_without_key: list[int] = field(default_factory=list)  # result indexes
    results: int = 0                                                # results read
    errored: list[dict[str, Any]] = field(default_factory=list)   # labelled items whose result has an error

    def problems(self) -> dict[str, Any]:
        """Every field but the pairs and the count of results read."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("pairs", "results")}


def labels_by_key(rows: list[LabelRow], key: str, truth: str) -> tuple[dict[str, list[LabelRow]], list[str]]:
    """The label rows by key, in label order (the first of a key is the one used), and the rows
    without a key or a truth."""
    grouped: dict[str, list[LabelRow]] = {}
    invalid: list[str] = []
    for row in rows:
        k = key_text(lookup(row.record, key))
        value = lookup(row.record, truth)
        if k is None or value is None or value == "":
            invalid.append(f"line {row.line}: no '{key if k is None else truth}'")
        else:
            grouped.setdefault(k, []).append(row)
    return grouped, invalid


def join_labels(results: Iterable[dict[str, Any]], rows: list[LabelRow], key: str, truth: str,
                predicted: str) -> Joined:
    """Labels joined to results in one pass over the results: only labelled results are kept."""
    joined = Joined()
    wanted, joined.invalid_labels = labels_by_key(rows, key, truth)
    by_key: dict[str, dict[str, Any]] = {}      # labelled keys only: the first result of each
    first_index: dict[str, int] = {}
    repeats: dict[str, list[int]] = {}
    for result in results:
        joined.results += 1
        k = key_text(lookup(result, key))
        index = int(result.get("index", 0))
        if k is None:
            joined.results_without_key.append(index)
            continue
        if k in first_index:
            repeats.setdefault(k, [first_index[k]]).append(index)
            continue
        first_index[k] = index
        if k in wanted:
            by_key[k] = result
        else:
            joined.unlabelled_results.append(k)
    joined.duplicate_results = {k: repeats[k] for k in first_index if k in repeats}
    for k, (first, *_) in wanted.items():
        found = by_key.get(k)
        if found is None:
            joined.unmatched_labels.append(k)
            continue
        guess = lookup(found, predicted)
        if found.get("error"):
            joined.errored.append({"key": k, "error": str(found["error"]), "predicted": guess})
        joined.pairs.append(Pair(k, lookup(first.record, truth), NO_PREDICTION if guess is None else guess, found,
                                 first.line))
    joined.duplicate_labels = {k: [row.line for row in group] for k, group in wanted.items() if len(group) > 1}
    return joined


@dataclass
class Exported:
    labels: list[dict[str, Any]] = field(default_factory=list)
    no_label: int = 0            # disapprovals that name no right verdict
    ties: int = 0                # reviewers split evenly


def labels_from_reviews(reviews: ReviewStore, pipeline: str) -> Exported:
    """The labels of an open review store."""
    exported = Exported()
    for key, group in groupby(reviews.of_pipeline(pipeline), key=lambda r: r.item_key):
        given = list(group)
        ranked = Counter(r.label for r in given if r.label is not None).most_common()
        if not ranked:
            exported.no_label += 1
        elif len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
            exported.ties += 1
        else:
            latest = max(given, key=lambda r: r.reviewed_at)
            exported.labels.append({
                "item_key": key, "label": ranked[0][0], "reviewers": len(given),
                "agree_with_judge": sum(r.agrees for r in given), "judged": latest.judged,
                "index": latest.item_index, "run": latest.run,
                "rationale": " | ".join(r.rationale for r in given if r.rationale) or None})
    return exported
