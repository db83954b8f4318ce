"""Each copy's verdicts against its original's: the final verdict (summary.count_by) and each
juror's vote (every {model, value} list in the results, as `runner eval` reads them).

A copy is a flip when the verdict differs from the original's. Whether a flip is what a
robust judge does depends on the probe's `expect`, and so does which pairs count:

- `unchanged`: every pair with both verdicts; a flip fails.
- `changed`: the pairs whose original passes the pipeline's pass rule (summary.pass_when, else
  its first rate; every pair when it has none), and for a juror those where it voted the
  original's verdict; a verdict that stays fails.
- `{not: X}`: the pairs whose original verdict is not X; a copy whose verdict is X fails.

Rates come with a 95% Wilson interval (scipy), and their n."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from runner.calibration.evaluate import vote_lists
from runner.outputs.report_view import lookup
from runner.pipeline.probes import Probe
from runner.probe.plan import Planned, excerpt
from runner.text.perturb import NOT_PERTURBED

FINAL = "verdict"           # the row of the final verdict (a juror's row is named by its model)
CONFIDENCE = 0.95


@dataclass
class Counts:
    n: int = 0
    flips: int = 0
    failures: int = 0

    def row(self, who: str) -> dict[str, Any]:
        return {"who": who, "n": self.n, "flips": self.flips, "flip_rate": _rate(self.flips, self.n),
                "flip_ci95": wilson(self.flips, self.n), "failures": self.failures,
                "failure_rate": _rate(self.failures, self.n), "failure_ci95": wilson(self.failures, self.n)}


@dataclass
class ProbeTally:
    probe: Probe
    copies: int = 0                   # copies made
    not_applicable: int = 0           # copies the perturbation found nothing to change in
    errored: int = 0                  # pairs where the original or the copy errored (or was never run)
    rows: dict[str, Counts] = field(default_factory=dict)
    example: dict[str, Any] | None = None


def wilson(successes: int, n: int) -> list[float] | None:
    """The 95% Wilson score interval of successes/n (None for n = 0)."""
    if n == 0:
        return None
    from scipy.stats import binomtest  # only a probe's report needs scipy
    interval = binomtest(successes, n).proportion_ci(confidence_level=CONFIDENCE, method="wilson")
    return [round(float(interval.low), 4), round(float(interval.high), 4)]


def _rate(part: int, n: int) -> float | None:
    return round(part / n, 4) if n else None


def measure(planned: Iterable[Planned], results: Iterable[dict[str, Any]], verdict_field: str,
            passes: Callable[[dict[str, Any]], bool],
            probes: Sequence[Probe]) -> tuple[list[ProbeTally], int, list[str]]:
    """Per probe, its counts for the final verdict and per juror; the number of originals;
    the jurors, in the order they first voted."""
    tallies = {probe.name: ProbeTally(probe) for probe in probes}
    jurors: dict[str, None] = {}
    originals = 0
    found = _by_index(iter(results))
    original: dict[str, Any] | None = None
    for entry in planned:
        if entry.probe is None:
            originals += 1
            original = found(entry.item.index) if entry.item is not None else None
            continue
        tally = tallies[entry.probe.name]
        if entry.item is None:
            tally.not_applicable += 1
            continue
        copy = found(entry.item.index)
        if copy is not None and any(str(w).startswith(NOT_PERTURBED) for w in copy.get("warnings") or []):
            tally.not_applicable += 1
            continue
        tally.copies += 1
        if original is None or copy is None or original.get("error") or copy.get("error"):
            tally.errored += 1
            continue
        if tally.example is None and entry.before is not None:
            tally.example = {"item": entry.input_index, "before": excerpt(entry.before),
                             "after": excerpt(entry.after)}
        pairs = {FINAL: (lookup(original, verdict_field), lookup(copy, verdict_field))}
        before, after = _votes(original), _votes(copy)
        for juror in before:
            jurors[juror] = None
            if juror in after:
                pairs[juror] = (before[juror], after[juror])
        passed = passes(original)
        final = pairs[FINAL][0]
        for who, (was, now) in pairs.items():
            _count(tally.rows.setdefault(who, Counts()), entry.probe.expect, was, now, passed,
                   who == FINAL or was == final)
    for tally in tallies.values():        # the final verdict first, then the jurors as they sit
        tally.rows = {who: tally.rows[who] for who in (FINAL, *jurors) if who in tally.rows}
    return list(tallies.values()), originals, list(jurors)


def _count(counts: Counts, expect: Any, was: Any, now: Any, passed: bool, voted_the_verdict: bool) -> None:
    if was is None or now is None:
        return
    flip = str(now) != str(was)
    if isinstance(expect, dict):
        if str(was) == str(expect["not"]):
            return
        failure = str(now) == str(expect["not"])
    elif expect == "changed":
        if not (passed and voted_the_verdict):
            return
        failure = not flip
    else:
        failure = flip
    counts.n += 1
    counts.flips += flip
    counts.failures += failure


def _votes(result: dict[str, Any]) -> dict[str, Any]:
    """{juror: value} over the result's vote lists (a juror that did not vote is absent)."""
    lists = vote_lists(result)
    return {(str(vote["model"]) if len(lists) == 1 else f"{path}: {vote['model']}"): vote["value"]
            for path, votes in lists.items() for vote in votes if vote.get("value") is not None}


def _by_index(results: Iterator[dict[str, Any]]) -> Callable[[int], dict[str, Any] | None]:
    """A lookup of results by increasing index, reading them in order (one at a time)."""
    current: list[dict[str, Any] | None] = [next(results, None)]

    def find(index: int) -> dict[str, Any] | None:
        while current[0] is not None and int(current[0].get("index", 0)) < index:
            current[0] = next(results, None)
        return current[0] if current[0] is not None and current[0].get("index") == index else None
    return find
