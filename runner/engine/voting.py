"""Jury aggregation, as pure functions; and the jurors' agreement kept for a run.

A juror whose call or parse failed casts no vote. No valid vote (or fewer than the
quorum) gives `on_all_failed`. All valid votes agreeing give that value; a strict
majority gives its value; otherwise `on_tie`. Ties are never broken by seat or
completion order."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import TYPE_CHECKING, Any

from runner.pipeline.step_catalog import step_schema

if TYPE_CHECKING:
    from runner.engine.context import Runtime

CATEGORICAL = ("unanimous", "majority", "plurality")
NUMERIC = ("mean", "median", "min", "max")
METHODS = CATEGORICAL + NUMERIC


# `vote:`'s defaults (method, on_tie, on_all_failed, reason_field), written once: in
# jury.schema.json, where `runner steps`, the language reference and editors show them.
VOTE_DEFAULTS: dict[str, Any] = {name: spec["default"] for name, spec in
                                 step_schema("jury")["properties"]["vote"]["properties"].items() if "default" in spec}


def vote_rule(vote: dict[str, Any]) -> dict[str, Any]:
    """A jury's `vote:` with the defaults of what it leaves out."""
    return {**VOTE_DEFAULTS, **vote}


@dataclass
class Vote:
    seat: str
    value: Any = None
    answer: dict[str, Any] | None = None
    error: str | None = None
    cached: bool = False
    latency_ms: int = 0
    stability: float | None = None     # with `repeat:`, the share of the seat's samples giving its value
    confidence: float | None = None    # with `confidence: true`, the probability the model gave its value
    samples: list[Any] | None = None   # with `repeat:`, each sample's value

    @property
    def valid(self) -> bool:
        return self.error is None


@dataclass
class Outcome:
    value: Any
    reason: str
    agreement: float | None
    winners: list[Vote] = field(default_factory=list)
    decided: bool = True
    outcome: Any = "decided"       # or the on_tie / on_all_failed value when no verdict was reached
    valid_votes: int = 0           # how many votes the verdict rests on
    short: bool = False            # fewer valid votes than the quorum (none at all included)


def _reason_of(vote: Vote, reason_field: str) -> str:
    answer = vote.answer or {}
    text = answer.get(reason_field) if isinstance(answer, dict) else None
    return f": {text}" if text else ""


class VoteError(ValueError):
    """The vote cannot be taken from the jurors' valid answers (not that they failed)."""


_KINDS = {bool: "booleans", str: "strings", dict: "objects", list: "lists", type(None): "nulls"}


def usable_votes(votes: list[Vote], method: str, field_name: str) -> list[Vote]:
    """The votes a method can count. For a numeric method, a juror that answered something
    other than a number casts no vote (its vote says what it answered); when no juror that
    answered gave a number, VoteError says why, naming what they answered instead."""
    if method not in NUMERIC:
        return votes
    answered = [v for v in votes if v.valid]
    if answered and not any(_is_number(v.value) for v in answered):
        kinds = sorted({_KINDS.get(type(v.value), type(v.value).__name__) for v in answered})
        raise VoteError(f"vote method {method} needs numbers; jurors answered {' and '.join(kinds)} "
                        f"for '{field_name}'")
    return [v if not v.valid or _is_number(v.value) else
            replace(v, error=f"answered {v.value!r} for '{field_name}', not a number (vote method {method})")
            for v in votes]


def _is_number(value: Any) -> bool:
    """A finite int or float a float can hold (NaN and infinity have no mean, JSON cannot write
    them, and an integer of hundreds of digits has no float to be averaged as)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def tally(votes: list[Vote], method: str = VOTE_DEFAULTS["method"], on_tie: Any = VOTE_DEFAULTS["on_tie"],
          on_all_failed: Any = VOTE_DEFAULTS["on_all_failed"], quorum: int | None = None,
          reason_field: str = VOTE_DEFAULTS["reason_field"]) -> Outcome:
    """`quorum` None: a majority of the seated jurors. A numeric method with no verdict gives
    None (never the on_all_failed text in a number field); `outcome` says what happened."""
    valid = [v for v in votes if v.valid and (method not in NUMERIC or _is_number(v.value))]
    failed_value = None if method in NUMERIC else on_all_failed
    needed = majority_of(len(votes)) if quorum is None else quorum
    if not valid or needed and len(valid) < needed:
        first, seats = next((v.error for v in votes if v.error), ""), len(votes)
        if valid:
            reason = f"Quorum not met: {len(valid)} valid vote(s), {needed} needed" + (
                f"; first error: {first}" if first else "")
        elif seats:
            reason = f"All {seats} juror{'s' if seats != 1 else ''} failed: {first or 'no juror had a usable answer'}"
        else:
            reason = "No enabled jurors"
        return Outcome(failed_value, reason, None, decided=False, outcome=on_all_failed, valid_votes=len(valid),
                       short=True)
    result = (_numeric(valid, method, reason_field) if method in NUMERIC
              else _categorical(valid, method, on_tie, reason_field))
    result.valid_votes = len(valid)
    return result


def majority_of(seats: int) -> int:
    """The default quorum: more than half of the seated jurors."""
    return seats // 2 + 1


def _shown(number: float) -> str:
    """A number for reading: 0.39999999999999997 reads 0.4 (the value itself is kept whole)."""
    return f"{number:.4g}"


def _numeric(valid: list[Vote], method: str, reason_field: str = "reason") -> Outcome:
    import statistics  # only numeric votes need it (it imports decimal and fractions)
    numbers = [float(v.value) for v in valid]
    combine: dict[str, Callable[[list[float]], float]] = {"mean": statistics.fmean, "median": statistics.median,
                                                         "min": min, "max": max}
    value: float = combine[method](numbers)
    if all(n.is_integer() for n in numbers) and float(value).is_integer():
        value = int(value)
    spread = max(numbers) - min(numbers)
    jurors = "; ".join(f"{v.seat} {_shown(float(v.value))}{_reason_of(v, reason_field)}" for v in valid)
    return Outcome(value, f"{method.capitalize()} of {len(numbers)} vote(s): {_shown(value)} "
                          f"(spread {_shown(spread)}). {jurors}", None, winners=valid)


def _categorical(valid: list[Vote], method: str, on_tie: Any, reason_field: str) -> Outcome:
    counts = Counter(comparable(v.value) for v in valid)            # in order of first appearance
    total = len(valid)
    top_count = max(counts.values())
    leaders = [k for k in counts if counts[k] == top_count]
    if len(counts) == 1:
        label = "Consensus"
    elif method == "majority" and top_count * 2 > total:
        label = "Majority"
    elif method == "plurality" and len(leaders) == 1:
        label = "Plurality"
    else:
        tally_text = ", ".join(f"{n} {k}" for k, n in counts.most_common())
        return Outcome(on_tie, f"Hung jury: {tally_text}", round(top_count / total, 4), decided=False, outcome=on_tie)
    winner_key = leaders[0]
    winners = [v for v in valid if comparable(v.value) == winner_key]
    value = winners[0].value
    reason = f"{label} ({top_count}/{total}): {winner_key}{_reason_of(winners[0], reason_field)}"
    return Outcome(value, reason, round(top_count / total, 4), winners=winners)


def comparable(value: Any) -> Any:
    """Values compared as they are when hashable, else by their text (lists, objects)."""
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)


def merge_answers(winners: list[Vote], all_votes: list[Vote], field_name: str,
                  expected: list[str] | None = None) -> dict[str, Any]:
    """The other fields of the winning answers: booleans by majority (ties false), other
    values from the first winning seat. With no winner every field is null. `expected`
    (the answer schema's properties) are always present."""
    keys: list[str] = [k for k in expected or [] if k != field_name]
    for vote in all_votes:
        if isinstance(vote.answer, dict):
            keys += [k for k in vote.answer if k not in keys and k != field_name]
    if not winners:
        return dict.fromkeys(keys)
    merged: dict[str, Any] = {}
    for key in keys:
        values = [v.answer.get(key) for v in winners if isinstance(v.answer, dict) and key in v.answer]
        if values and all(isinstance(x, bool) for x in values):
            merged[key] = sum(bool(x) for x in values) * 2 > len(values)
        else:
            merged[key] = values[0] if values else None
    return merged


# ---- agreement between jurors over a run ---------------------------------------------

class _PairSums:
    """Running sums over jury rows ({seat: vote}), one row at a time, so a run of any size holds
    no rows: per pair of seats, the items both voted on and a sum over them (agreed, or apart), and
    the seats that ever voted (known only at the end)."""

    def __init__(self) -> None:
        self.items = 0
        self._both: Counter[tuple[str, str]] = Counter()
        self._sums: defaultdict[tuple[str, str], float] = defaultdict(float)
        self._seats: set[str] = set()

    def _add_pairs(self, row: dict[str, Any], votes: dict[str, Any], apart: Callable[[Any, Any], float]) -> None:
        self.items += 1
        self._seats |= set(row)
        for a, b in combinations(sorted(votes), 2):
            self._both[a, b] += 1
            self._sums[a, b] += apart(votes[a], votes[b])

    def pairwise(self) -> dict[str, float | None]:
        """For each pair of seats, the pair's sum over the items both voted on, per item."""
        return {f"{a}~{b}": round(self._sums[a, b] / self._both[a, b], 4) if self._both[a, b] else None
                for a, b in combinations(sorted(self._seats), 2)}

    def pairwise_items(self) -> dict[str, int]:
        """For each pair of seats, the items both voted on: what its pairwise figure is over."""
        return {f"{a}~{b}": self._both[a, b] for a, b in combinations(sorted(self._seats), 2)}


class Agreement(_PairSums):
    """Juror agreement: pairwise (the share of items, both voted, on which two seats agreed),
    and Fleiss' kappa over the items every seat voted on."""

    def __init__(self) -> None:
        super().__init__()
        # Per set of seats that voted on an item: [items, sum of P_i], and votes per category.
        self._by_seats: dict[frozenset[str], tuple[list[float], Counter[Any]]] = {}

    def add(self, row: dict[str, Any]) -> None:
        self._add_pairs(row, row, lambda a, b: comparable(a) == comparable(b))
        sums, categories = self._by_seats.setdefault(frozenset(row), ([0, 0.0], Counter()))
        sums[0] += 1
        raters = len(row)
        if raters >= 2:
            counts = Counter(comparable(v) for v in row.values())
            sums[1] += (sum(n * n for n in counts.values()) - raters) / (raters * (raters - 1))
            categories.update(counts)

    def summary(self) -> dict[str, Any]:
        full = self._by_seats.get(frozenset(self._seats))
        return {"items": self.items, "pairwise_agreement": self.pairwise(), "pairwise_items": self.pairwise_items(),
                "fleiss_kappa": self.fleiss_kappa(), "fleiss_kappa_items": int(full[0][0]) if full else 0}

    def fleiss_kappa(self) -> float | None:
        raters = len(self._seats)
        full = self._by_seats.get(frozenset(self._seats))
        if raters < 2 or full is None or not full[0][0]:
            return None
        (items, p_sum), counts = full
        p_j = [counts[c] / (items * raters) for c in sorted(counts, key=repr)]
        p_e = sum(p * p for p in p_j)
        if p_e == 1:
            return None
        return round((p_sum / items - p_e) / (1 - p_e), 4) + 0.0        # never -0.0


class IntervalAgreement(_PairSums):
    """Agreement of numeric votes: Krippendorff's alpha (interval) over the items two or more
    seats voted on (alpha = 1 - D_o / D_e; Krippendorff 2011, "Computing Krippendorff's
    Alpha-Reliability"), and per pair of seats the mean absolute difference. Exact equality
    (what kappa counts) says nothing of scores that differ by 0.01."""

    measure = "Krippendorff's alpha (interval)"

    def __init__(self) -> None:
        super().__init__()
        self._n = 0                   # pairable values: votes on items with two or more votes
        self._pairable = 0            # items with two or more votes
        self._sum = 0.0
        self._squares = 0.0
        self._within = 0.0            # sum over items of sum_{i != j} (v_i - v_j)^2 / (m - 1)

    def add(self, row: dict[str, Any]) -> None:
        votes = {seat: float(value) for seat, value in row.items() if _is_number(value)}
        self._add_pairs(row, votes, lambda a, b: abs(a - b))
        m = len(votes)
        if m < 2:
            return
        total, squares = sum(votes.values()), sum(v * v for v in votes.values())
        self._n += m
        self._pairable += 1
        self._sum += total
        self._squares += squares
        self._within += 2 * (m * squares - total * total) / (m - 1)

    def alpha(self) -> float | None:
        """None when undefined: fewer than two pairable votes, or every vote the same."""
        n = self._n
        across = 2 * (n * self._squares - self._sum * self._sum)
        if n < 2 or across <= 1e-12 * max(1.0, self._squares * n):
            return None
        return round(1 - (n - 1) * self._within / across, 4) + 0.0

    def summary(self) -> dict[str, Any]:
        return {"items": self.items, "measure": self.measure, "krippendorff_alpha": self.alpha(),
                "krippendorff_alpha_items": self._pairable, "pairwise_mean_abs_difference": self.pairwise(),
                "pairwise_items": self.pairwise_items()}


JuryAgreement = Agreement | IntervalAgreement


def _agreements(runtime: Runtime) -> dict[str, JuryAgreement]:
    """Each jury step's agreement figures, kept for the run as running sums over the votes behind
    its results (an item's own, or those a result it reused kept: runner/stores/kept.py)."""
    runtime.summary_sections["juries"] = jury_summary
    return {}


def add_votes(runtime: Runtime, noted: list[list[Any]]) -> None:
    """An item's jury votes (kept.note_votes), added once per result by the run's recorder
    (outputs/summary.ErrorCount), wherever the item ran: Krippendorff's alpha for a numeric vote,
    else Fleiss' kappa."""
    for step, numeric, votes in noted:
        kind = IntervalAgreement if numeric else Agreement
        runtime.resource(_agreements).setdefault(step, kind()).add(votes)


def jury_summary(runtime: Runtime) -> dict[str, Any]:
    """summary.json's `juries`: per jury step, the juror agreement that fits its votes, named (`measure`)."""
    return {step: agreement.summary() for step, agreement in runtime.resource(_agreements).items()}
