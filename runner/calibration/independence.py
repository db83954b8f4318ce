"""How independent a jury's votes are, against human labels, and whether the items whose
repeated samples disagreed are the ones a judge gets wrong.

Error correlation: for each pair of jurors, Pearson's r of their error indicators (1 where a
juror's vote is not the label), over the items both voted on: the phi coefficient. It is
undefined when either juror never errs, or always does, on those items.

The effective number of independent votes of k jurors whose errors correlate r on average:

    n_eff = k / (1 + (k - 1) * r)

the number of independent votes whose mean has the variance of the mean of k equally
correlated ones: Kish's design effect 1 + (m - 1) * rho (L. Kish, Survey Sampling, Wiley,
1965), with the jurors as the cluster. r is the mean of the defined pairwise correlations,
taken as 0 when it is below 0 (votes never count for more than their number). Nine jurors
whose errors correlate 0.5 are worth 1.8 votes.

A pair whose errors correlate STRONG or more is named: when one errs, so does the other,
and their agreement counts for little more than one vote."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Any

STRONG = 0.7
MIN_PAIRS = 3           # items both jurors voted on, below which no correlation is given


def error_correlation(rows: Sequence[tuple[Any, dict[str, Any]]]) -> dict[str, Any]:
    """`rows`: (label, {juror: vote}) per item. Pairwise error correlations, n_eff, warnings."""
    import numpy as np
    jurors = list(dict.fromkeys(name for _, votes in rows for name in votes))
    pairs: list[dict[str, Any]] = []
    for a, b in combinations(jurors, 2):
        both = [(str(votes[a]) != str(truth), str(votes[b]) != str(truth)) for truth, votes in rows
                if a in votes and b in votes]
        errors_a = np.array([e[0] for e in both], dtype=float)
        errors_b = np.array([e[1] for e in both], dtype=float)
        r = None
        if len(both) >= MIN_PAIRS and errors_a.std() > 0 and errors_b.std() > 0:
            r = round(float(np.corrcoef(errors_a, errors_b)[0, 1]), 4)
        pairs.append({"jurors": [a, b], "n": len(both), "errors": [int(errors_a.sum()), int(errors_b.sum())],
                      "correlation": r})
    defined = [p["correlation"] for p in pairs if p["correlation"] is not None]
    mean = round(sum(defined) / len(defined), 4) if defined else None
    effective = None if mean is None else round(len(jurors) / (1 + (len(jurors) - 1) * max(mean, 0.0)), 2)
    warnings = [f"jurors {p['jurors'][0]} and {p['jurors'][1]}: their errors correlate {p['correlation']} over "
                f"{p['n']} item(s): when one errs the other does too, and their agreement is worth little more "
                f"than one vote" for p in pairs if p["correlation"] is not None and p["correlation"] >= STRONG]
    return {"jurors": jurors, "pairs": pairs, "mean_error_correlation": mean, "effective_votes": effective,
            "formula": "n_eff = k / (1 + (k - 1) * mean r) (Kish's design effect, Survey Sampling, 1965)",
            "strong": STRONG, "warnings": warnings}


def stability_accuracy(rows: Sequence[tuple[Any, Any, Any]], field: str) -> dict[str, Any]:
    """`rows`: (label, judged, stability) per item. Accuracy of the items whose samples all
    agreed (stability 1.0) and of the others."""
    groups: dict[str, list[bool]] = {"stable": [], "unstable": []}
    for truth, judged, stability in rows:
        if isinstance(stability, (int, float)) and not isinstance(stability, bool):
            groups["stable" if stability >= 1 else "unstable"].append(str(judged) == str(truth))
    return {"field": field, **{name: {"n": len(hits), "accuracy": round(sum(hits) / len(hits), 4) if hits else None}
                               for name, hits in groups.items()}}
