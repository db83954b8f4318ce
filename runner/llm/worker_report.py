"""A worker's LLM accounting for one block of items (`take_report`), and the driver taking it
in (`absorb_report`), so summary.json and calls.jsonl read as a local run's: an executor whose
blocks run in other processes (Ray's) sends one back with each block; the worker's service
(`RunRole.worker`) keeps its calls' lines for it instead of writing a calls.jsonl. Counts are
taken and reset after each block: a block retried elsewhere after its worker died is counted
once, by the worker that finished it."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from runner.llm.client.sender import ModelStats


def take_report(service: Any, items: list[int]) -> dict[str, Any]:
    """What the worker's LLM service counted since the last report; `items`: the block's items,
    whose failure tally moves to the driver. Counts are taken by subtraction: a block running
    beside it in the same worker keeps its share for its own report."""
    service.flush()
    return {"stats": {name: _take(stats) for name, stats in list(service.stats.items())},
            "items": service.tally.take(items),
            "errors": dict(service.tally.last_errors),
            "breakers": dict(service.sender.breakers),
            "calls": service.take_calls()}


def _take(stats: ModelStats) -> dict[str, Any]:
    taken = dict(vars(stats))
    for name, value in taken.items():
        setattr(stats, name, getattr(stats, name) - value)
    return taken


def absorb_report(service: Any, report: dict[str, Any]) -> None:
    """Add one block's report to the driver's LLM service (its calls appended to calls.jsonl)."""
    for name, counted in report["stats"].items():
        stats = service.stats.setdefault(name, ModelStats())
        for field in fields(ModelStats):
            setattr(stats, field.name, getattr(stats, field.name) + counted[field.name])
        service.spec(name)                      # hints name the models of an endpoint
    service.tally.absorb(report["items"])
    service.tally.last_errors.update(report["errors"])
    service.sender.breakers.update(report["breakers"])
    service.add_calls(report["calls"])
