"""Rates and the pass rule, one object each.

A rate (`summary.rates.NAME: EXPR`) is the share of items for which EXPR is true, over those
where it is defined: an item it cannot be evaluated on is left out, counted by why (`errored`
or `undefined`); an errored item it can be evaluated on counts as EXPR says (`errored_counted`).
So one errored item never deletes a rate, and a gate sees every errored item (`unclean`). A
rate with no item to be over is null, with the reason.

The pass rule (`PassRule`: `summary.pass_when`, else the first rate) is what an item must meet
to pass; everything that reads it (summary, gates, eval, --failed-from, probes, view) goes
through `pass_check`."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from runner.engine.context import TEMPLATE_FAILURES
from runner.pipeline.model import SummarySpec
from runner.templating.sandbox import Renderer
from runner.text.perturb import get_path

Check = Callable[[dict[str, Any]], bool | None]
ERRORED = "errored"               # undefined on the item, which has an error: it was not judged
UNDEFINED = "undefined"           # undefined on an item without an error


@dataclass(frozen=True)
class PassRule:
    """`summary.pass_when` (slide_judge: not red), else the first summary rate."""

    name: str
    expression: str

    @classmethod
    def of(cls, summary: SummarySpec) -> PassRule | None:
        """The rule of a pipeline's `summary:` section (or run.json's copy of it); None when none."""
        if summary.pass_when:
            return cls("pass_when", str(summary.pass_when))
        return cls.first_rate(summary)

    @classmethod
    def first_rate(cls, summary: SummarySpec) -> PassRule | None:
        """The first summary rate: what `--fail-under` gates on."""
        return next((cls(name, expression) for name, expression in summary.rates.items()), None)

    def describe(self) -> str:
        return f"{self.name} ({self.expression})"

    def checker(self, condition: Callable[[str, dict[str, Any]], Any], scope: Mapping[str, Any],
                failures: tuple[type[BaseException], ...]) -> Check:
        """Whether a result meets the rule by `condition(expression, scope + result)`; None when
        `failures` are raised."""
        def check(result: dict[str, Any]) -> bool | None:
            try:
                return bool(condition(self.expression, {**scope, "result": result}))
            except failures:
                return None
        return check


def pass_check(summary: SummarySpec, renderer: Renderer, scope: Mapping[str, Any],
               failures: tuple[type[BaseException], ...] = TEMPLATE_FAILURES) -> tuple[PassRule, Check] | None:
    """The pass rule of a `summary:` (a pipeline's, or run.json's copy) and its check of a result,
    evaluated by `renderer` in `scope` (see PassRule.checker); None when there is no rule."""
    rule = PassRule.of(summary)
    return None if rule is None else (rule, rule.checker(renderer.condition, scope, failures))


@dataclass
class RateCount:
    """One rate, counted as results pass by."""

    numerator: int = 0
    denominator: int = 0
    left_out: Counter[str] = field(default_factory=Counter)
    errored_counted: int = 0          # errored items the expression could be evaluated on, counted in
    undefined_because: str = ""

    def count(self, result: Mapping[str, Any], said: Callable[[], object],
              failures: tuple[type[BaseException], ...]) -> bool | None:
        """Count one result as `said()` (the rate's expression on it) says; left out when it
        raises one of `failures`."""
        errored = bool(result.get("error"))
        try:
            value = bool(said())
        except failures as exc:
            self.leave_out(ERRORED, "") if errored else self.leave_out(UNDEFINED, str(exc))
            return None
        self.denominator += 1
        self.numerator += value
        self.errored_counted += errored
        return value

    def leave_out(self, why: str, message: str = "") -> None:
        self.left_out[why] += 1
        if message and not self.undefined_because:
            self.undefined_because = message

    def entry(self, total: int) -> dict[str, Any]:
        """summary.json's `rates.NAME` (`total`: the results counted)."""
        value = round(self.numerator / self.denominator, 4) if self.denominator else None
        entry: dict[str, Any] = {"value": value, "numerator": self.numerator, "denominator": self.denominator,
                                 "left_out": sum(self.left_out.values()), "left_out_by": dict(self.left_out),
                                 "errored_counted": self.errored_counted}
        if self.undefined_because:
            entry["undefined_because"] = self.undefined_because
        if value is None:
            entry["reason"] = self._reason(total)
        return entry

    def _reason(self, total: int) -> str:
        if not total:
            return "no item in the run"
        parts = [f"{n} {why}" for why, n in self.left_out.items()]
        because = f" ({self.undefined_because})" if self.undefined_because else ""
        return f"no item to compute it over: every item was left out ({', '.join(parts)}){because}"


def rate_entries(summary: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every rate of a summary.json as `rates.NAME` entries (an older summary's bare `NAME` and
    `NAME_count`: over its total, none left out)."""
    section = summary.get("rates")
    if isinstance(section, Mapping) and all(isinstance(v, Mapping) for v in section.values()):
        return {str(name): dict(entry) for name, entry in section.items()}
    total = summary.get("total")
    return {name: {"value": value, "numerator": summary.get(f"{name}_count"),
                   "denominator": total if isinstance(total, int) else None, "left_out": 0, "left_out_by": {}}
            for name, value in summary.items()
            if f"{name}_count" in summary and isinstance(value, (int, float)) and not isinstance(value, bool)}


def lookup(record: Any, path: str) -> Any:
    """A field of a result, label or record: `a.b` reads inside nested objects (and `a.0` a list's
    first); a literal key named `a.b` wins."""
    if isinstance(record, dict) and path in record:
        return record[path]
    return get_path(record, path.split("."))


def counted_as(result: dict[str, Any], field: str) -> str:
    """What a result is counted as by `field` (summary.json's counts, diff, probe): its value as
    text, `ERROR` for an errored result with none."""
    value = lookup(result, field)
    return "ERROR" if value is None and result.get("error") else str(value)


def as_given(number: float) -> Fraction | float:
    """A threshold as the user wrote it (`0.8` is 4/5, not the float nearest it, which 8/10 is
    below); an infinite one as it is."""
    return Fraction(str(number)) if math.isfinite(number) else number


def exact(entry: Mapping[str, Any]) -> Fraction | float:
    """A rate's value exactly, numerator/denominator (a gate compares this, not the value rounded
    for display: 2/3 is below 0.66667, though its value reads 0.6667)."""
    numerator, denominator = entry.get("numerator"), entry.get("denominator")
    if isinstance(numerator, int) and isinstance(denominator, int) and denominator > 0:
        return Fraction(numerator, denominator)
    return float(entry["value"])


def unclean(entry: Mapping[str, Any]) -> int:
    """The items a rate was not cleanly over: those it left out and the errored ones it counted."""
    return int(entry.get("left_out") or 0) + int(entry.get("errored_counted") or 0)


def rate_text(entry: Mapping[str, Any], percent: bool = False) -> str:
    """`0.3846 (5/13, 3 of them errored; 1 left out: 1 errored)` (`38.5%` with percent), or
    `n/a (0 counted; 6 left out: 6 errored)`."""
    value = entry.get("value")
    denominator = entry.get("denominator")
    shown = ("n/a" if not isinstance(value, (int, float)) else f"{value * 100:.1f}%" if percent else f"{value:.4g}")
    errored = int(entry.get("errored_counted") or 0)
    over = (f"{entry.get('numerator')}/{denominator}{f', {errored} of them errored' if errored else ''}"
            if isinstance(value, (int, float)) else f"{denominator or 0} counted")
    left_out = entry.get("left_out") or 0
    by = ", ".join(f"{n} {why}" for why, n in (entry.get("left_out_by") or {}).items())
    return f"{shown} ({over}{f'; {left_out} left out: {by}' if left_out else ''})"
