"""Each juror's vote in a probe run, and for a numeric vote (mean, median, min, max) the
verdict the pipeline would give if that juror's vote were the jury's: the steps after the
jury run again with it (only when each is one of PURE: nothing is sent to a model or written
twice), then the verdict field rendered. Kept in the result as `probe_jurors` (the format
and why: docs/robustness.md). Top-level jury steps only."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from runner.checks.result_shapes import as_result
from runner.engine.context import Runtime, StepsOutcome, render_at
from runner.engine.voting import NUMERIC
from runner.errors import RunnerError
from runner.inputs import Item
from runner.pipeline.model import StepSpec

FIELD = "probe_jurors"
PURE = ("compute", "decide", "fail", "quote_match", "read_lines", "read_table")   # run again: no model, no side effect

RunSteps = Callable[..., Awaitable[StepsOutcome]]


async def juror_verdicts(runtime: Runtime, item: Item, scope: dict[str, Any],
                         run_steps: RunSteps) -> dict[str, dict[str, dict[str, Any]]]:
    """{jury step: {seat: {"vote": value, "verdict": ..., "unjudged": why}}} of the item's juries."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    specs = runtime.pipeline.steps
    for position, spec in enumerate(specs):
        result = scope["steps"].get(spec.id)
        if spec.uses != "jury" or not isinstance(result, Mapping) or not isinstance(result.get("votes"), list):
            continue
        vote = spec.args.get("vote") or {}
        numeric = vote.get("method") in NUMERIC
        seats: dict[str, dict[str, Any]] = {}
        for cast in result["votes"]:
            if not isinstance(cast, Mapping) or cast.get("value") is None:
                continue
            entry: dict[str, Any] = {"vote": cast["value"]}
            if numeric:
                entry["verdict"], why = await _verdict_if(runtime, item, scope, spec, result, cast["value"],
                                                          specs[position + 1:], run_steps)
                if why:
                    entry["unjudged"] = why
            seats[str(cast.get("model"))] = entry
        found[spec.id] = seats
    return found


async def _verdict_if(runtime: Runtime, item: Item, scope: dict[str, Any], jury: StepSpec,
                      result: Mapping[str, Any], value: Any, later: tuple[StepSpec, ...],
                      run_steps: RunSteps) -> tuple[Any, str | None]:
    """The verdict with `value` as the jury's vote, or (None, why not)."""
    verdict_field = runtime.pipeline.summary.count_by
    if not isinstance(verdict_field, str) or verdict_field not in runtime.pipeline.output:
        return None, "the verdict field is not an output field"
    calling = [s.id for s in later if s.uses not in PURE or s.substeps]
    if calling:
        return None, (f"the steps after the jury include {', '.join(calling)}, which are not run again for one "
                      "juror (only steps that call no model and change nothing are: " + ", ".join(PURE) + ")")
    steps = {k: v for k, v in scope["steps"].items() if k not in {s.id for s in later}}
    steps[jury.id] = as_result({**result, jury.args["vote"]["field"]: value})
    trial = {**scope, "steps": steps}
    try:
        outcome = await run_steps(runtime, later, trial, item=item)
        if outcome.error:
            return None, outcome.error
        return render_at(runtime, runtime.pipeline.output[verdict_field], ("output", verdict_field), trial), None
    except RunnerError as exc:
        return None, str(exc)
