"""summary.json: counts by a field, total, rates, named fields and assessment rules."""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from runner.engine.context import Runtime, condition_at, render_at, run_warnings
from runner.engine.health import item_end
from runner.engine.rates import RateCount, counted_as
from runner.engine.voting import add_votes
from runner.errors import TemplateError
from runner.runs.results_file import Taken
from runner.stores.kept import VOTES_FIELD, answered_before

KEPT_GROUPS = 10                    # error groups summary.json lists
MAX_GROUPS = 1000                   # distinct error messages counted apart; the rest are counted together
OTHER_ERRORS = "(other errors)"


class ErrorCount:
    """The run's errors, kept as results arrive: an item with `error`, or one whose LLM work got
    no usable answer (runner/llm/tally.py; the tally forgets an item once it is counted), which
    the result is then given as its `error` (before it is written: its rate, junit, view and a
    rerun read what the count read), counted, and grouped by message (the run's error lines and
    `error_groups`)."""

    def __init__(self, runtime: Runtime):
        self.runtime = runtime
        self.count = 0
        self.groups: Counter[str] = Counter()
        self.first: dict[str, float] = {}       # message: the input position of its first item

    def add(self, position: int, result: dict[str, Any]) -> bool:
        """Count the result of the item at input `position` (the LLM tally knows items by it: a
        result's own `index` may be anything an output called so); whether a model's answer made
        it: its own calls got one, or it was reused (the memo, serve's store, a job's earlier
        run) with the note that one did (kept.ANSWERED_FIELD), which counts as the cache's
        answer does (`reused_answered`: health.unanswered_calls). Its juries' votes
        (kept.VOTES_FIELD) are added to the run's juror agreement here, once, wherever it ran."""
        end = item_end(self.runtime, position, result)
        add_votes(self.runtime, result.get(VOTES_FIELD) or [])     # checked where read from a file or store
        if end.error:
            self.count += 1
            self._group(" ".join(end.error.split()), position)
            if not result.get("error"):     # one truth: the result says so too (rates, junit, view, reruns)
                result["error"] = end.error
        if answered_before(result) and not end.answered:
            self.runtime.reused_answered += 1
            return True
        return end.answered

    def add_all(self, taken: Taken) -> None:
        """Errors of results taken in from elsewhere (a --failed-from rerun's parent), each
        message at the index of its first item there, as the parent counted it."""
        self.count += sum(taken.errors.values())
        for message, n in taken.errors.items():
            self._group(message, taken.first.get(message, math.inf), n)

    def _group(self, message: str, position: float, n: int = 1) -> None:
        if message not in self.groups and len(self.groups) >= MAX_GROUPS:
            message = OTHER_ERRORS               # a run of a million distinct messages keeps a bounded table
        self.groups[message] += n
        self.first[message] = min(self.first.get(message, math.inf), position)

    def most_common(self) -> list[tuple[str, int]]:
        """The groups, most frequent first, and of equal counts the one whose first item comes
        first in the input: the same order however the items ran (in what order they finished)."""
        return sorted(self.groups.items(), key=lambda group: (-group[1], self.first[group[0]]))


class SummaryTally:
    """summary.json's counts and rates, kept as results pass by: `add` each, then `summary`."""

    def __init__(self, runtime: Runtime, errors: ErrorCount) -> None:
        """`errors` as counted during the run."""
        spec = runtime.pipeline.summary
        self.runtime = runtime
        self.errors = errors
        self.field = spec.count_by
        self.base = {"params": runtime.params, "env": runtime.env, "run": runtime.run_info}
        self.rates = dict(spec.rates)
        self.counts = {name: RateCount() for name in self.rates}
        self.counter: Counter[str] = Counter()
        self.total = 0

    def add(self, result: dict[str, Any]) -> dict[str, bool]:
        """Count one result; what each rate said of it. An item the rate's expression is
        undefined on is left out of that rate (and says nothing of it): as `errored` when the
        item has an error (its result lacks what a judged one has), else as `undefined`."""
        self.total += 1
        if self.field:
            self.counter[counted_as(result, self.field)] += 1
        said: dict[str, bool] = {}
        scope = {**self.base, "result": result}
        for name, expression in self.rates.items():
            value = self.counts[name].count(result, functools.partial(
                condition_at, self.runtime, expression, ("summary", "rates", name), scope), (TemplateError,))
            if value is not None:
                said[name] = value
        return said

    def summary(self, results: Iterable[dict[str, Any]], interrupted: bool = False) -> dict[str, Any]:
        """summary.json, once every result was added (`results` as `summary.fields` see them)."""
        runtime, spec, total = self.runtime, self.runtime.pipeline.summary, self.total
        error_count = self.errors.count
        counts = dict(self.counter)
        scope: dict[str, Any] = {**self.base, "results": results, "counts": counts, "total": total,
                                 "errors": error_count}
        summary: dict[str, Any] = {"pipeline": runtime.pipeline.name, "total": total, "errors": error_count}
        if error_count:
            groups = self.errors.most_common()
            kept = [(text, n) for text, n in groups if text != OTHER_ERRORS][:KEPT_GROUPS]
            summary["error_groups"] = [{"count": n, "error": text} for text, n in kept]
            rest = sum(n for _, n in groups) - sum(n for _, n in kept)
            if rest:                # the others together: the groups add up to `errors`
                summary["error_groups"].append({"count": rest, "error": OTHER_ERRORS})
        if self.field:
            summary["count_by"] = self.field
            summary["counts"] = counts
        problems: list[str] = []     # a broken summary expression must not lose the results
        entries = {name: count.entry(total) for name, count in self.counts.items()}
        for name, entry in entries.items():
            summary[name] = entry["value"]
            summary[f"{name}_count"] = entry["numerator"]
            if entry["value"] is None:          # no rate: why, beside it (`no item in the run`)
                summary[f"{name}_reason"] = entry["reason"]
                if self.counts[name].undefined_because:
                    problems.append(self.counts[name].undefined_because)
        if entries:
            summary["rates"] = entries
        for name, expression in spec.fields.items():
            try:
                summary[name] = render_at(runtime, expression, ("summary", "fields", name), {**scope, **summary})
            except TemplateError as exc:
                problems.append(str(exc))
        for number, rule in enumerate(spec.assessment):
            where = ("summary", "assessment", number)
            try:
                if "when" not in rule or condition_at(runtime, rule["when"], (*where, "when"), {**scope, **summary}):
                    summary[spec.assessment_key] = render_at(
                        runtime, rule["text"], (*where, "text"), {**scope, **summary})
                    break
            except TemplateError as exc:
                problems.append(str(exc))
                break
        ending = {"summary_errors": problems, "run_warnings": run_warnings(runtime), "interrupted": interrupted}
        return summary | {key: value for key, value in ending.items() if value}
