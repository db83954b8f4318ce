"""`runner eval`'s accuracy, balanced accuracy, kappa and macro F1 are scikit-learn's on the
same predictions; `--by FIELD` scores every slice apart, with n and intervals."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from runner.calibration import metrics

# scikit-learn (seconds to import) is imported by the tests that compare with it, on one worker
pytestmark = pytest.mark.xdist_group("sklearn")
CLASSES = ["supported", "partially_supported", "not_supported"]


def _run_folder(root: Any, n: int, seed: int) -> tuple[list[str], list[str], list[str]]:
    """A run folder of `n` results (a judge right about 60% of the time) and its labels."""
    rng = random.Random(seed)
    truth = [rng.choice(CLASSES) for _ in range(n)]
    judged = [t if rng.random() < 0.6 else rng.choice(CLASSES) for t in truth]
    sources = [rng.choice(["wice", "fever"]) for _ in range(n)]
    folder = root / "run"
    folder.mkdir()
    (folder / "results.jsonl").write_text("".join(
        json.dumps({"index": i + 1, "id": f"k{i}", "label": judged[i]}) + "\n" for i in range(n)), encoding="utf-8")
    (folder / "summary.json").write_text(json.dumps({"pipeline": "p", "count_by": "label"}), encoding="utf-8")
    (root / "labels.jsonl").write_text("".join(
        json.dumps({"id": f"k{i}", "truth": truth[i], "source": sources[i]}) + "\n" for i in range(n)),
        encoding="utf-8")
    return truth, judged, sources


def _expected(truth: list[str], judged: list[str]) -> dict[str, float]:
    from sklearn.metrics import accuracy_score, balanced_accuracy_score, cohen_kappa_score, f1_score
    return {"accuracy": accuracy_score(truth, judged), "balanced_accuracy": balanced_accuracy_score(truth, judged),
            "kappa": cohen_kappa_score(truth, judged), "macro_f1": f1_score(truth, judged, average="macro")}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_eval_scores_equal_scikit_learns(project: Any, cli: Any, seed: int) -> None:
    truth, judged, _ = _run_folder(project.root, 60, seed)
    result = cli("eval", "run", "--labels", "labels.jsonl", "--key", "id", "--truth", "truth")
    assert result.exit_code == 0, result.output
    m = json.loads((project.root / "run/eval.json").read_text())["metrics"]
    for name, value in _expected(truth, judged).items():
        assert m[name] == pytest.approx(value, abs=1e-4), name
    for name in ("accuracy", "balanced_accuracy", "kappa"):
        low, high = m[f"{name}_ci95"]
        assert low <= m[name] <= high


def test_eval_by_scores_every_slice_with_n_and_intervals(project: Any, cli: Any) -> None:
    truth, judged, sources = _run_folder(project.root, 80, 7)
    result = cli("eval", "run", "--labels", "labels.jsonl", "--key", "id", "--truth", "truth", "--by", "source")
    assert result.exit_code == 0, result.output
    by = json.loads((project.root / "run/eval.json").read_text())["by"]
    assert by["field"] == "source" and sorted(by["slices"]) == ["fever", "wice"]
    for name, m in by["slices"].items():
        kept = [i for i, s in enumerate(sources) if s == name]
        assert m["n"] == len(kept)
        for metric, value in _expected([truth[i] for i in kept], [judged[i] for i in kept]).items():
            assert m[metric] == pytest.approx(value, abs=1e-4), (name, metric)
        assert m["accuracy_ci95"] and m["balanced_accuracy_ci95"] and m["kappa_ci95"]
        assert f"source {name}: n {m['n']}, accuracy {m['accuracy']}" in result.output
    assert "## By source" in (project.root / "run/eval.md").read_text()


def test_batch_balanced_accuracy_equals_scikit_learn() -> None:
    from sklearn.metrics import balanced_accuracy_score
    rng = random.Random(5)
    for _ in range(20):
        t = [rng.randrange(3) for _ in range(30)]
        p = [rng.randrange(3) for _ in range(30)]
        assert metrics.batch_balanced_accuracy(t, p, 3)[0] == pytest.approx(balanced_accuracy_score(t, p))


def test_paired_difference_is_zero_for_one_judge_and_positive_for_a_better_one() -> None:
    truth = ["a", "b"] * 30
    same = metrics.paired_difference(truth, truth[::-1], truth[::-1])
    assert same["difference"] == 0 and same["ci95"] == [0, 0]
    worse = ["a"] * 60
    better = metrics.paired_difference(truth, worse, truth)
    assert better["difference"] == 0.5 and better["ci95"][0] > 0


def test_an_item_with_no_prediction_is_wrong_under_positive_as_in_every_score(project: Any, cli: Any) -> None:
    """`--positive`: an errored item with no verdict became "fail", a right answer for every
    negative label, so accuracy and kappa rose and --fail-under-kappa passed."""
    from sklearn.metrics import accuracy_score, cohen_kappa_score
    folder = project.root / "run"
    folder.mkdir()
    predicted = ["yes", "no", None, None, "yes", "no"]
    truth = ["GOOD", "BAD", "BAD", "BAD", "BAD", "GOOD"]
    (folder / "results.jsonl").write_text("".join(json.dumps(
        {"index": i + 1, "id": i + 1, **({"verdict": v} if v else {"error": "step 'c': no pred"})}) + "\n"
        for i, v in enumerate(predicted)), encoding="utf-8")
    (folder / "summary.json").write_text(json.dumps({"pipeline": "p", "count_by": "verdict"}), encoding="utf-8")
    (project.root / "labels.jsonl").write_text("".join(json.dumps({"id": i + 1, "truth": t}) + "\n"
                                                       for i, t in enumerate(truth)), encoding="utf-8")
    result = cli("eval", "run", "--labels", "labels.jsonl", "--key", "id", "--truth", "truth",
                 "--positive", "yes", "--positive", "GOOD", "--fail-under-kappa", "0.2")
    m = json.loads((folder / "eval.json").read_text())["metrics"]
    t = ["pass" if v == "GOOD" else "fail" for v in truth]
    p = ["pass" if v == "yes" else "fail" if v else "(no prediction)" for v in predicted]
    assert m["accuracy"] == pytest.approx(accuracy_score(t, p), abs=1e-4)
    assert m["kappa"] == pytest.approx(cohen_kappa_score(t, p), abs=1e-4)
    assert m["accuracy"] == pytest.approx(2 / 6, abs=1e-4) and result.exit_code == 1, result.output


def test_the_paired_interval_does_not_depend_on_which_class_a_constant_judge_names() -> None:
    """align's ship decision: resamples without a class scored a judge always naming A 1.0 and
    one always naming B 0.0, so the same evidence shipped or not by the majority's direction."""
    truth = ["A"] * 6 + ["B"] * 2      # a quarter of unstratified resamples hold no B
    always_a, always_b = metrics.paired_difference(truth, ["A"] * 8, truth), metrics.paired_difference(truth, ["B"] * 8, truth)
    assert always_a == always_b == {"metric": "balanced_accuracy", "n": 8, "difference": 0.5, "ci95": [0.5, 0.5]}
    # (hunt) one item a class resamples to itself: its zero-width interval shipped a judge on 2 test items
    assert metrics.paired_difference(["A", "B"], ["B", "A"], ["A", "B"])["ci95"] is None


def test_numeric_scores_leave_out_an_errored_items_text_fallback(project: Any, cli: Any) -> None:
    """(review) A numeric judge's errored item carries its jury's LLM_ERROR: eval refused the run
    (`must hold numbers`) once errored items no longer decided the kind; they are no prediction."""
    folder = project.root / "run"
    folder.mkdir()
    scores = [3, 4, 5, 2, "LLM_ERROR"]
    (folder / "results.jsonl").write_text("".join(json.dumps(
        {"index": i + 1, "score": s, **({"error": "step 'jury': no juror answered"} if s == "LLM_ERROR" else {})})
        + "\n" for i, s in enumerate(scores)), encoding="utf-8")
    (folder / "summary.json").write_text(json.dumps({"pipeline": "p", "count_by": "score"}), encoding="utf-8")
    (project.root / "labels.jsonl").write_text("".join(json.dumps({"index": i + 1, "truth": t}) + "\n"
                                                       for i, t in enumerate([3, 4, 4, 2, 5])), encoding="utf-8")
    result = cli("eval", "run", "--labels", "labels.jsonl", "--key", "index", "--truth", "truth")
    report = json.loads((folder / "eval.json").read_text())
    assert result.exit_code == 0 and report["kind"] == "numeric" and report["scored"] == 4, result.output
    assert report["problems"]["no_prediction"] == ["5"] and report["metrics"]["mae"] == 0.25
