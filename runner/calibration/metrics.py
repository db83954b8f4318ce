"""Agreement metrics: scikit-learn for the classification scores, scipy for correlations
and the bootstrap, and how independent a jury's votes are. Imported lazily: only `runner
eval`, `runner sweep` and `runner align` pay for them.

Error correlation: per pair of jurors, the phi coefficient of their error indicators (1 where
a vote is not the label) over the items both voted on; undefined when either never errs, or
always does. The effective number of independent votes of k jurors whose errors correlate r
on average (the mean defined pairwise correlation, 0 when below 0) is

    n_eff = k / (1 + (k - 1) * r)

Kish's design effect with the jurors as the cluster (L. Kish, Survey Sampling, Wiley, 1965).
A pair whose errors correlate STRONG or more is named: their agreement is worth little more
than one vote."""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import combinations
from typing import Any

from runner.calibration.labels import NO_PREDICTION

BOOTSTRAP_RESAMPLES = 1000
CONFIDENCE = 0.95
STRONG = 0.7
MIN_PAIRS = 3           # items both jurors voted on, below which no correlation is given


def _number(value: float | None, digits: int = 4) -> float | None:
    """A JSON-safe rounded float (never -0.0); NaN (undefined, e.g. kappa with one class) becomes None."""
    return None if value is None or not math.isfinite(float(value)) else round(float(value), digits) + 0.0


@contextmanager
def _scoring() -> Iterator[None]:
    """scikit-learn and scipy without their warnings (an undefined score is reported as None) and
    without scikit-learn's checks of its arguments (ours are lists of strings, or arrays of floats,
    of one length): the checks cost about a fifth of `categorical`'s time (bench/RESULTS.md)."""
    from sklearn import config_context
    with warnings.catch_warnings(), config_context(skip_parameter_validation=True):
        warnings.simplefilter("ignore")
        yield


def kappa(truth: Sequence[Any], predicted: Sequence[Any]) -> float | None:
    """Cohen's kappa; None when undefined (both sides all one and the same class)."""
    from sklearn.metrics import cohen_kappa_score
    if not truth:
        return None
    with _scoring():
        return _number(cohen_kappa_score([str(t) for t in truth], [str(p) for p in predicted]))


def _tables(truth_codes: Any, predicted_codes: Any, classes: int) -> Any:
    """Confusion tables (rows: resamples; truth by predicted) as shares, by one bincount."""
    import numpy as np
    t, p = np.atleast_2d(truth_codes), np.atleast_2d(predicted_codes)
    rows, n = t.shape
    cells = (np.arange(rows)[:, None] * classes * classes + t * classes + p).ravel()
    return np.bincount(cells, minlength=rows * classes * classes).reshape(rows, classes, classes) / n


def batch_kappa(truth_codes: Any, predicted_codes: Any, classes: int) -> Any:
    """Kappa of many resamples at once (rows): confusion tables by bincount, then the usual
    (po - pe) / (1 - pe), so a 1000-resample bootstrap is one array computation rather than
    a thousand calls of scikit-learn; tests check it equals cohen_kappa_score."""
    import numpy as np
    tables = _tables(truth_codes, predicted_codes, classes)
    observed = np.trace(tables, axis1=1, axis2=2)
    expected = (tables.sum(axis=2) * tables.sum(axis=1)).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(expected < 1, (observed - expected) / (1 - expected), np.nan)


def batch_balanced_accuracy(truth_codes: Any, predicted_codes: Any, classes: int) -> Any:
    """Balanced accuracy (the mean recall of the classes the labels hold, as scikit-learn's
    balanced_accuracy_score) of many resamples at once."""
    import numpy as np
    tables = _tables(truth_codes, predicted_codes, classes)
    support = tables.sum(axis=2)
    with np.errstate(divide="ignore", invalid="ignore"):
        recall = np.diagonal(tables, axis1=1, axis2=2) / support
    return np.nanmean(np.where(support > 0, recall, np.nan), axis=1)


def batch_accuracy(truth_codes: Any, predicted_codes: Any, classes: int) -> Any:
    import numpy as np
    return (np.atleast_2d(truth_codes) == np.atleast_2d(predicted_codes)).mean(axis=1)


BATCH = {"accuracy": batch_accuracy, "balanced_accuracy": batch_balanced_accuracy, "kappa": batch_kappa}


def codes(*sides: Sequence[Any]) -> tuple[int, list[Any]]:
    """The classes of all sides as numbers: (how many classes, each side as an array)."""
    import numpy as np
    classes = sorted({str(v) for side in sides for v in side})
    code = {c: i for i, c in enumerate(classes)}
    return len(classes), [np.array([code[str(v)] for v in side], dtype=int) for side in sides]


def interval(truth: Sequence[Any], predicted: Sequence[Any], metric: str = "kappa") -> list[float] | None:
    """A percentile bootstrap 95% interval of `metric` (accuracy, balanced_accuracy or kappa;
    scipy.stats.bootstrap, paired, seeded); None when some resamples have no defined value (a
    handful of items, or one class)."""
    import numpy as np
    from scipy.stats import bootstrap
    if len(truth) < 2:
        return None
    classes, (t, p) = codes(truth, predicted)
    statistic = BATCH[metric]
    with _scoring():                         # degenerate resamples: an undefined interval is None
        result = bootstrap((t, p), lambda a, b, axis=-1: statistic(a, b, classes), paired=True,
                           vectorized=True, n_resamples=BOOTSTRAP_RESAMPLES, confidence_level=CONFIDENCE,
                           method="percentile", rng=np.random.default_rng(0))
    low, high = _number(result.confidence_interval.low), _number(result.confidence_interval.high)
    return None if low is None or high is None else [low, high]


def paired_difference(truth: Sequence[Any], before: Sequence[Any], after: Sequence[Any],
                      metric: str = "balanced_accuracy", seed: int = 0) -> dict[str, Any]:
    """`metric` of `after` minus that of `before` on the same items, with a paired percentile
    bootstrap 95% interval: each resample draws items (with replacement) and scores both
    judges on the same draw, so what the two share cancels out. It draws within each label
    class, as many as the class holds: a resample without a class would score a judge that
    always answers the other class 1.0 (or one always answering it 0.0), so the interval
    would depend on which class a constant judge names. When every class holds one item, every
    resample is the same draw: the interval is none (a zero-width one would claim certainty
    from one item a class)."""
    import numpy as np
    classes, (t, b, a) = codes(truth, before, after)
    statistic = BATCH[metric]
    difference = float(statistic(t, a, classes)[0] - statistic(t, b, classes)[0]) if len(t) else None
    ci95 = None
    members = [np.flatnonzero(t == code) for code in np.unique(t)]
    if len(t) >= 2 and max(map(len, members)) >= 2:
        rng = np.random.default_rng(seed)
        draws = np.hstack([held[rng.integers(0, len(held), size=(BOOTSTRAP_RESAMPLES, len(held)))]
                           for held in members])
        with np.errstate(all="ignore"):
            deltas = statistic(t[draws], a[draws], classes) - statistic(t[draws], b[draws], classes)
        deltas = deltas[~np.isnan(deltas)]
        if len(deltas):
            ci95 = [_number(bound) for bound in np.percentile(deltas, [2.5, 97.5])]
    return {"metric": metric, "n": len(t), "difference": _number(difference), "ci95": ci95}


def interval_text(interval: list[float] | None, n: int) -> str:
    """`[0.67, 0.94]`, or why there is none: `n/a (6 labels)` (too few to resample, or one class)."""
    return f"[{interval[0]}, {interval[1]}]" if interval else f"n/a ({n} labels)"


def _headline(t: list[str], p: list[str], classes: list[str]) -> dict[str, Any]:
    """Accuracy, balanced accuracy, kappa and macro F1: what a sweep compares, and the baseline's."""
    from sklearn.metrics import accuracy_score, balanced_accuracy_score, f1_score
    return {"accuracy": _number(accuracy_score(t, p)), "balanced_accuracy": _number(balanced_accuracy_score(t, p)),
            "kappa": kappa(t, p), "macro_f1": _number(f1_score(t, p, labels=classes, average="macro", zero_division=0))}


def categorical(truth: Sequence[Any], predicted: Sequence[Any], detail: bool = True) -> dict[str, Any]:
    """Accuracy, kappa (with its interval), confusion matrix, per-class P/R/F1, and the
    always-the-majority-label baseline beside them; without `detail`, only the headline
    scores (what a sweep compares)."""
    from sklearn.metrics import confusion_matrix, precision_recall_fscore_support
    t = [str(v) for v in truth]
    p = [str(v) for v in predicted]
    if not t:
        return {"n": 0}
    classes = sorted(set(t) | set(p))
    with _scoring():
        scores = _headline(t, p, classes)
        if not detail:
            return {"n": len(t), **scores}
        out: dict[str, Any] = {"n": len(t)}
        for name in ("accuracy", "balanced_accuracy", "kappa"):
            out.update({name: scores[name], f"{name}_ci95": interval(t, p, name)})
        precision, recall, f1, support = precision_recall_fscore_support(t, p, labels=classes, zero_division=0)
        majority, _ = Counter(t).most_common(1)[0]
        return {**out, "macro_f1": scores["macro_f1"], "classes": classes,
                "confusion": {"labels": classes, "rows_truth_columns_predicted":
                              confusion_matrix(t, p, labels=classes).tolist()},
                "per_class": {c: {"precision": _number(precision[i]), "recall": _number(recall[i]),
                                  "f1": _number(f1[i]), "support": int(support[i])} for i, c in enumerate(classes)},
                "baseline": {"predicts": majority, **_headline(t, [majority] * len(t), classes)}}


def binary(truth: Sequence[Any], predicted: Sequence[Any], positive: Sequence[str],
           detail: bool = True) -> dict[str, Any]:
    """Pass/fail: a value counts as positive when it is one of `positive`; an item with no
    prediction stays one (NO_PREDICTION), wrong whatever its label, as in every other score."""
    wanted = {str(v) for v in positive}
    t, p = (["pass" if str(v) in wanted else NO_PREDICTION if v == NO_PREDICTION else "fail" for v in side]
            for side in (truth, predicted))
    return {"positive": sorted(wanted), **categorical(t, p, detail)}


def as_numbers(values: Sequence[Any]) -> list[float] | None:
    """The values as floats; None when one is not a number (a boolean is not)."""
    try:
        return None if any(isinstance(v, bool) for v in values) else [float(v) for v in values]
    except (TypeError, ValueError):
        return None


def numeric(truth: Sequence[float], predicted: Sequence[float]) -> dict[str, Any]:
    """MAE, bias (mean signed error, predicted minus truth), Pearson and Spearman."""
    import numpy as np
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import mean_absolute_error
    if not truth:
        return {"n": 0}
    t, p = np.asarray(truth, dtype=float), np.asarray(predicted, dtype=float)
    with _scoring():
        out: dict[str, Any] = {"n": len(t), "mae": _number(mean_absolute_error(t, p)),
                               "bias": _number(np.mean(p - t)), "pearson": None, "spearman": None}
        if len(t) >= 2:
            out["pearson"] = _number(pearsonr(t, p).statistic)
            out["spearman"] = _number(spearmanr(t, p).statistic)
    return out


def error_correlation(rows: Sequence[tuple[Any, dict[str, Any]]]) -> dict[str, Any]:
    """`rows`: (label, {juror: vote}) per item. Pairwise error correlations, n_eff, warnings."""
    import numpy as np
    jurors = list(dict.fromkeys(name for _, votes in rows for name in votes))
    pairs: list[dict[str, Any]] = []
    for a, b in combinations(jurors, 2):
        both = [(str(votes[a]) != str(truth), str(votes[b]) != str(truth)) for truth, votes in rows
                if a in votes and b in votes]
        errors_a, errors_b = np.array(both, dtype=float).reshape(-1, 2).T
        r = None
        if len(both) >= MIN_PAIRS and errors_a.std() > 0 and errors_b.std() > 0:
            r = round(float(np.corrcoef(errors_a, errors_b)[0, 1]), 4)
        pairs.append({"jurors": [a, b], "n": len(both), "errors": [int(errors_a.sum()), int(errors_b.sum())],
                      "correlation": r})
    defined = [p["correlation"] for p in pairs if p["correlation"] is not None]
    mean = round(sum(defined) / len(defined), 4) if defined else None
    effective = None if mean is None else round(len(jurors) / (1 + (len(jurors) - 1) * max(mean, 0.0)), 2)
    warned = [f"jurors {p['jurors'][0]} and {p['jurors'][1]}: their errors correlate {p['correlation']} over "
              f"{p['n']} item(s): when one errs the other does too, and their agreement is worth little more "
              f"than one vote" for p in pairs if p["correlation"] is not None and p["correlation"] >= STRONG]
    return {"jurors": jurors, "pairs": pairs, "mean_error_correlation": mean, "effective_votes": effective,
            "formula": "n_eff = k / (1 + (k - 1) * mean r) (Kish's design effect, Survey Sampling, 1965)",
            "strong": STRONG, "warnings": warned}


def stability_accuracy(rows: Sequence[tuple[Any, Any, Any]], field: str) -> dict[str, Any]:
    """`rows`: (label, judged, stability) per item. Accuracy of the items whose repeated
    samples all agreed (stability 1.0) and of the others."""
    groups: dict[str, list[bool]] = {"stable": [], "unstable": []}
    for truth, judged, stability in rows:
        if isinstance(stability, (int, float)) and not isinstance(stability, bool):
            groups["stable" if stability >= 1 else "unstable"].append(str(judged) == str(truth))
    return {"field": field, **{name: {"n": len(hits), "accuracy": round(sum(hits) / len(hits), 4) if hits else None}
                               for name, hits in groups.items()}}
