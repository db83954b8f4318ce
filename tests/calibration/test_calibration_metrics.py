"""Calibration metrics against hand-computed values, and the labels join."""

from __future__ import annotations

import random

import pytest

from runner.calibration import metrics
from runner.calibration.labels import NO_PREDICTION, LabelRow, join_labels, read_labels
from runner.errors import InputError


def test_categorical_against_hand_computed_values():
    truth = ["A", "A", "A", "B"]
    judged = ["A", "A", "B", "B"]
    m = metrics.categorical(truth, judged)
    # po = 3/4; pe = 3/4*1/2 + 1/4*1/2 = 1/2; kappa = (3/4 - 1/2) / (1 - 1/2) = 0.5
    assert m["n"] == 4 and m["accuracy"] == 0.75 and m["kappa"] == 0.5
    assert m["confusion"] == {"labels": ["A", "B"], "rows_truth_columns_predicted": [[2, 1], [0, 1]]}
    # A: predicted twice, both right (P 1), 2 of 3 found (R 2/3), F1 0.8; B: P 1/2, R 1, F1 2/3
    assert m["per_class"]["A"] == {"precision": 1.0, "recall": 0.6667, "f1": 0.8, "support": 3}
    assert m["per_class"]["B"] == {"precision": 0.5, "recall": 1.0, "f1": 0.6667, "support": 1}
    assert m["macro_f1"] == 0.7333
    # always A: right 3 times of 4, kappa 0 (po = pe = 3/4), F1 of A 6/7 and of B 0
    assert m["baseline"] == {"predicts": "A", "accuracy": 0.75, "balanced_accuracy": 0.5, "kappa": 0.0,
                             "macro_f1": 0.4286}
    assert m["kappa_ci95"] is None       # 4 items: some resamples are all one class, so no interval


def test_kappa_degenerate_all_one_class():
    same = metrics.categorical(["A"] * 5, ["A"] * 5)
    assert same["accuracy"] == 1.0 and same["kappa"] is None and same["kappa_ci95"] is None   # 0/0: undefined
    assert same["baseline"]["kappa"] is None
    # labels all A, judge mixed: po = 3/5 = pe (1 * 3/5), so kappa is exactly 0
    assert metrics.kappa(["A"] * 5, ["A", "A", "A", "B", "B"]) == 0.0
    assert metrics.kappa([], []) is None


def test_kappa_perfect_and_inverted():
    assert metrics.kappa(["A", "B", "A", "B"], ["A", "B", "A", "B"]) == 1.0
    assert metrics.kappa(["A", "B", "A", "B"], ["B", "A", "B", "A"]) == -1.0


def test_bootstrap_interval_narrows_with_more_items():
    truth = ["A", "A", "A", "B", "B", "C", "C", "A", "B", "C"]
    judged = ["A", "A", "B", "B", "B", "C", "A", "A", "B", "C"]
    point = metrics.kappa(truth, judged)
    widths = []
    for copies in (2, 8, 32):
        low, high = metrics.interval(truth * copies, judged * copies, "kappa")
        assert low <= point <= high
        widths.append(high - low)
    assert widths[0] > widths[1] > widths[2] > 0
    assert metrics.interval(truth, judged, "kappa") == metrics.interval(truth, judged, "kappa")   # seeded


@pytest.mark.xdist_group("sklearn")      # scikit-learn imported by one worker only
def test_batch_kappa_equals_scikit_learn():
    from sklearn.metrics import cohen_kappa_score
    rng = random.Random(7)
    for _ in range(20):
        n = rng.randint(5, 40)
        t = [rng.randint(0, 3) for _ in range(n)]
        p = [x if rng.random() < 0.6 else rng.randint(0, 3) for x in t]
        expected = cohen_kappa_score(t, p)
        assert metrics.batch_kappa(t, p, 4)[0] == pytest.approx(expected)


def test_binary_from_positive_values():
    b = metrics.binary(["VALID", "MISLEADING", "VALID", "UNSUPPORTED"], ["VALID", "VALID", "VALID", "UNSUPPORTED"],
                       ["VALID"])
    assert b["positive"] == ["VALID"] and b["classes"] == ["fail", "pass"]
    assert b["accuracy"] == 0.75 and b["per_class"]["pass"] == {"precision": 0.6667, "recall": 1.0, "f1": 0.8,
                                                                "support": 2}


def test_numeric_against_hand_computed_values():
    m = metrics.numeric([1, 2, 3, 4], [2, 2, 4, 5])
    # errors 1, 0, 1, 1: MAE 0.75, bias +0.75; r = 5.5 / sqrt(5 * 6.75); rho on ranks (1.5, 1.5, 3, 4)
    assert m == {"n": 4, "mae": 0.75, "bias": 0.75, "pearson": 0.9467, "spearman": 0.9487}
    flat = metrics.numeric([1, 2, 3], [2, 2, 2])
    assert flat["pearson"] is None and flat["spearman"] is None and flat["bias"] == 0.0


def rows(*records):
    return [LabelRow(n + 1, r) for n, r in enumerate(records)]


def test_join_reports_every_problem_and_drops_nothing():
    results = [{"index": 1, "id": 1, "verdict": "VALID"}, {"index": 2, "id": 2, "verdict": "MISLEADING"},
               {"index": 3, "id": 3, "verdict": "VALID"}, {"index": 4, "id": 3, "verdict": "UNSUPPORTED"},
               {"index": 5, "id": 4, "error": "step 'jury': boom"}, {"index": 6, "verdict": "VALID"},
               {"index": 7, "id": 7, "verdict": "VALID"}]
    labels = rows({"id": 1, "truth": "VALID"}, {"id": "2", "truth": "VALID"}, {"id": 2, "truth": "MISLEADING"},
                  {"id": 3, "truth": "VALID"}, {"id": 4, "truth": "VALID"}, {"id": 9, "truth": "VALID"},
                  {"truth": "VALID"}, {"id": 8})
    joined = join_labels(results, labels, "id", "truth", "verdict")
    assert [(p.key, p.truth, p.predicted) for p in joined.pairs] == [
        ("1", "VALID", "VALID"), ("2", "VALID", "MISLEADING"), ("3", "VALID", "VALID"),
        ("4", "VALID", NO_PREDICTION)]                          # the errored item counts as a miss
    assert joined.duplicate_labels == {"2": [2, 3]}              # the first label is used
    assert joined.duplicate_results == {"3": [3, 4]}             # the first result is used
    assert joined.unmatched_labels == ["9"]
    assert joined.unlabelled_results == ["7"]
    assert joined.results_without_key == [6]
    assert joined.invalid_labels == ["line 7: no 'id'", "line 8: no 'truth'"]
    assert joined.errored == [{"key": "4", "error": "step 'jury': boom", "predicted": None}]


def test_join_reads_nested_keys():
    results = [{"index": 1, "citation": {"index": 5}, "verdict": "VALID"}]
    joined = join_labels(results, rows({"citation.index": 5, "v": "VALID"}), "citation.index", "v", "verdict")
    assert [(p.key, p.predicted) for p in joined.pairs] == [("5", "VALID")]


def test_labels_in_three_formats(tmp_path):
    (tmp_path / "l.csv").write_text("id,truth\n1,VALID\n2,MISLEADING\n", encoding="utf-8")
    (tmp_path / "l.json").write_text('[{"id": 1, "truth": "VALID"}]', encoding="utf-8")
    (tmp_path / "l.jsonl").write_text('{"id": 1, "truth": "VALID"}\n\n{"id": 2, "truth": "X"}\n', encoding="utf-8")
    assert [(r.line, r.record) for r in read_labels(tmp_path / "l.csv")] == [
        (2, {"id": "1", "truth": "VALID"}), (3, {"id": "2", "truth": "MISLEADING"})]
    assert [r.record["id"] for r in read_labels(tmp_path / "l.json")] == [1]
    assert [r.line for r in read_labels(tmp_path / "l.jsonl")] == [1, 3]
    (tmp_path / "bad.jsonl").write_text('{"id": 1}\n{oops\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.jsonl:2:2: not valid JSON"):
        read_labels(tmp_path / "bad.jsonl")
    with pytest.raises(InputError, match="labels file not found"):
        read_labels(tmp_path / "missing.jsonl")
