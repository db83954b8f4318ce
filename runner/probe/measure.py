"""A probe run's items and the comparison of their verdicts.

The plan: each original, then its perturbed copies, numbered in that order. It is a pure
function of the pipeline's probes and the input, so it is made again when the run has ended
to pair each copy's result with its original's (both in item order: one original's results
held at a time). A copy of an item field is made here; a copy of a step's field carries the
perturbation to the engine, which applies it once the step has run.

The comparison: each copy's verdicts against its original's, the final verdict
(summary.count_by) and each juror's vote (the `probe_jurors` a probe run keeps in each result,
runner/engine/juror_verdicts.py; for older runs, every {model, value} list in the results, as
`runner eval` reads them). A copy is a flip when the verdict differs from the original's (a
numeric vote: moves by more than the probe's `tolerance`). Which pairs count, and which flips
fail, is the probe's `expect` (docs/robustness.md has the table); a numeric juror is judged by
the verdict the pipeline would give with its vote as the jury's, and a pair where that could
not be had is `unjudged`, with why. Rates come with a 95% Wilson interval (scipy), and their n."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from runner.calibration.evaluate import vote_lists
from runner.calibration.metrics import CONFIDENCE
from runner.engine.context import TEMPLATE_FAILURES
from runner.engine.juror_verdicts import FIELD as JURORS_FIELD
from runner.engine.rates import ERRORED, RateCount, counted_as, lookup
from runner.inputs import Item, ItemStream
from runner.pipeline.probes import Probe
from runner.text.perturb import NOT_PERTURBED, Rewrite, get_path, perturbed, with_path

EXCERPT = 240


@dataclass(frozen=True)
class Planned:
    """One entry of the plan: an original (probe None), a copy, or a copy that could not be
    made (item None: the field held nothing the perturbation works on)."""

    item: Item | None
    original: int                      # the original's index in the run
    input_index: int                   # the original's number in the input
    probe: Probe | None = None
    variant: int = 0
    before: Any = None                 # the field's value, and the copy's (item fields only)
    after: Any = None


def plan(originals: Iterable[Item], probes: Sequence[Probe], items: int | None = None) -> Iterator[Planned]:
    """Every original (the first `items` when given) followed by its copies, numbered 1, 2, ..."""
    number = 0
    for item in itertools.islice(originals, items):
        number += 1
        original = number
        yield Planned(Item(number, item.value, item.parent, item.error, item.exploded_from), original, item.index)
        for probe in probes:
            for variant in range(probe.variants):
                copy, before, after = _copy(item, probe, variant, number + 1)
                if copy is not None:
                    number += 1
                yield Planned(copy, original, item.index, probe, variant, before, after)


def _copy(item: Item, probe: Probe, variant: int, number: int) -> tuple[Item | None, Any, Any]:
    """The copy (None: not made), and the field's value before and after (item fields only)."""
    if item.error:          # an item the input could not give: its copies error as it does (not "nothing to perturb")
        return Item(number, item.value, item.parent, item.error, item.exploded_from), None, None
    seed = f"{probe.name}|{variant}|{item.key}"
    if probe.step is not None:
        rewrite = Rewrite(probe.name, probe.step, probe.path, probe.kind, tuple(sorted(probe.options.items())),
                          variant, seed)
        return Item(number, item.value, item.parent, exploded_from=item.exploded_from, rewrites=(rewrite,)), None, None
    before = get_path(item.value, probe.path)
    after = perturbed(probe.kind, before, probe.options, variant, seed)
    if after is None:
        return None, before, None
    return Item(number, with_path(item.value, probe.path, after), item.parent, exploded_from=item.exploded_from), \
        before, after


def probe_items(probes: Sequence[Probe], items: int | None) -> Any:
    """ItemSource.derive for a probe run: the selected items and their copies."""
    def derive(selected: ItemStream) -> ItemStream:
        return ItemStream(lambda: (p.item for p in plan(selected, probes, items) if p.item is not None))
    return derive


def excerpt(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= EXCERPT else text[:EXCERPT - 3] + "..."


FINAL = "verdict"           # the row of the final verdict (a juror's row is named by its model)


@dataclass
class Counts:
    n: int = 0
    flips: int = 0
    failures: int = 0
    numeric: bool = False             # the votes are numbers: flips by tolerance, `not` through the verdict rule
    unjudged: int = 0                 # pairs left out: the verdict with this juror's vote could not be had
    why: str | None = None            # the first reason of those

    def row(self, who: str, tolerance: float) -> dict[str, Any]:
        row = {"who": who, "n": self.n, "flips": self.flips, "flip_rate": _rate(self.flips, self.n),
               "flip_ci95": wilson(self.flips, self.n), "failures": self.failures,
               "failure_rate": _rate(self.failures, self.n), "failure_ci95": wilson(self.failures, self.n),
               "vote": "numeric" if self.numeric else "categorical"}
        if self.numeric:
            row["tolerance"] = tolerance
        if self.unjudged:
            row.update(unjudged=self.unjudged, unjudged_why=self.why)
        return row


@dataclass(frozen=True)
class Cast:
    """One vote (or the final verdict) of one result, and for a numeric vote the verdict the
    pipeline gives with it (None: not had, `why`)."""

    value: Any
    verdict: Any = None
    numeric: bool = False
    why: str | None = None


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


@dataclass
class Originals:
    """The originals' own counts and rates, the copies left out: what the run's figures are
    for the items as given, each rate counted as summary.json counts one (`RateCount.count`;
    an original never run is left out as errored)."""

    verdict_field: str
    rates: dict[str, Callable[[dict[str, Any]], bool | None]]
    items: int = 0
    errors: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    counted: dict[str, RateCount] = field(default_factory=dict)      # each rate, as summary.json counts one

    def add(self, result: dict[str, Any] | None) -> None:
        self.items += 1
        errored = result is None or bool(result.get("error"))           # None: never run
        verdict = "ERROR" if result is None else counted_as(result, self.verdict_field)     # None: never run
        self.errors += errored
        self.counts[verdict] = self.counts.get(verdict, 0) + 1
        for name in self.rates:
            count = self.counted.setdefault(name, RateCount())
            if result is None:
                count.leave_out(ERRORED)
            else:
                count.count(result, functools.partial(self.rates[name], result), TEMPLATE_FAILURES)

    def view(self) -> dict[str, Any]:
        rates = {name: (self.counted.get(name) or RateCount()).entry(self.items) for name in self.rates}
        return {"items": self.items, "errors": self.errors, "counts": self.counts, "rates": rates}


def measure(planned: Iterable[Planned], results: Iterable[dict[str, Any]], passes: Callable[[dict[str, Any]], bool],
            probes: Sequence[Probe], originals: Originals) -> tuple[list[ProbeTally], list[str]]:
    """Per probe, its counts for the final verdict and per juror; the jurors, in the order they
    first voted. Each original's result (None: never run) is added to `originals`."""
    tallies = {probe.name: ProbeTally(probe) for probe in probes}
    jurors: dict[str, None] = {}
    verdict_field = originals.verdict_field
    found = _by_index(iter(results))
    original: dict[str, Any] | None = None
    for entry in planned:
        if entry.probe is None:
            original = found(entry.item.index) if entry.item is not None else None
            originals.add(original)
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
        was_final = lookup(original, verdict_field)
        before, after = _jurors(original), _jurors(copy)
        # a juror that voted on one side only, where the jury sat on both (on a copy the pipeline
        # stopped before its jury, no juror is paired): its row says it was left out, and why
        seated = dict.fromkeys([*before, *after]) if before and after else {}
        jurors.update(dict.fromkeys(before) | seated)
        pairs = {FINAL: (_cast(was_final), _cast(lookup(copy, verdict_field))),
                 **{juror: (before.get(juror, NO_VOTE_BEFORE), after.get(juror, NO_VOTE_AFTER)) for juror in seated}}
        passed = passes(original)
        for who, (was, now) in pairs.items():
            _count(tally.rows.setdefault(who, Counts()), entry.probe, was, now, passed, was_final,
                   final=who == FINAL)
    for tally in tallies.values():        # the final verdict first, then the jurors as they sit
        tally.rows = {who: tally.rows[who] for who in (FINAL, *jurors) if who in tally.rows}
    return list(tallies.values()), list(jurors)


def _count(counts: Counts, probe: Probe, was: Cast, now: Cast, passed: bool, final_verdict: Any,
           final: bool) -> None:
    if was.value is None or now.value is None:
        if was.why or now.why:          # a juror that voted on one of the pair only: left out, and why
            counts.unjudged += 1
            counts.why = counts.why or was.why or now.why
        return
    counts.numeric = counts.numeric or was.numeric
    flip = abs(now.value - was.value) > probe.tolerance if was.numeric and now.numeric \
        else str(now.value) != str(was.value)
    expect = probe.expect
    if (isinstance(expect, dict) or (expect == "changed" and not final)) and (was.verdict is None
                                                                               or now.verdict is None):
        counts.unjudged += 1
        counts.why = counts.why or was.why or now.why
        return
    if isinstance(expect, dict):
        if str(was.verdict) == str(expect["not"]):
            return
        failure = str(now.verdict) == str(expect["not"])
    elif expect == "changed":
        if not (passed and (final or str(was.verdict) == str(final_verdict))):
            return
        # a juror's score is judged through the verdict the pipeline gives with it, as `not` is
        failure = str(now.verdict) == str(was.verdict) if was.numeric and not final else not flip
    else:
        failure = flip
    counts.n += 1
    counts.flips += flip
    counts.failures += failure


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


NO_VOTE_BEFORE = Cast(None, why="it gave no vote on the original (its call failed, or its answer was unusable)")
NO_VOTE_AFTER = Cast(None, why="it gave no vote on the copy (its call failed, or its answer was unusable)")


def _cast(value: Any) -> Cast:
    """A categorical vote or verdict: its own verdict. A number is a score: compared by tolerance."""
    return Cast(value, value, _is_number(value))


def _jurors(result: dict[str, Any]) -> dict[str, Cast]:
    """{juror: its vote} of a result (a juror that did not vote is absent): from the result's
    probe_jurors, else from its vote lists."""
    kept = result.get(JURORS_FIELD)
    if isinstance(kept, dict) and kept:
        return {(seat if len(kept) == 1 else f"{step}: {seat}"):
                (Cast(entry["vote"], entry.get("verdict"), True, entry.get("unjudged")) if "verdict" in entry
                 else Cast(entry["vote"], entry["vote"]))
                for step, seats in kept.items() if isinstance(seats, dict)
                for seat, entry in seats.items() if isinstance(entry, dict) and entry.get("vote") is not None}
    lists = vote_lists(result)
    return {(str(vote["model"]) if len(lists) == 1 else f"{path}: {vote['model']}"): _listed(vote["value"])
            for path, votes in lists.items() for vote in votes if vote.get("value") is not None}


def _listed(value: Any) -> Cast:
    """A vote from a vote list: a score there carries no verdict of its own."""
    if _is_number(value):
        return Cast(value, None, True, "the run keeps no verdict per juror (made before probe_jurors): probe again")
    return Cast(value, value)


def _by_index(results: Iterator[dict[str, Any]]) -> Callable[[int], dict[str, Any] | None]:
    """A lookup of results by increasing index, reading them in order (one at a time)."""
    current: list[dict[str, Any] | None] = [next(results, None)]

    def find(index: int) -> dict[str, Any] | None:
        while current[0] is not None and int(current[0].get("index", 0)) < index:
            current[0] = next(results, None)
        return current[0] if current[0] is not None and current[0].get("index") == index else None
    return find
