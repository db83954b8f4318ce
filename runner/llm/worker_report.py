"""A worker's LLM accounting for one block of items, and the driver taking it in, so
summary.json (calls, cache hits, failures, tokens, cost, items without a usable answer,
hints) and calls.jsonl read as a local run's. An executor whose blocks run in other
processes (Ray's) sends `take_report` back with each block and the driver `absorb_report`s it;
the worker's service runs with `RunRole.worker` set, so it keeps its calls' lines for
the report instead of writing a calls.jsonl of its own.

The worker's counts are taken and reset after each block: a block retried elsewhere after
its worker died is counted once, by the worker that finished it."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from runner.llm.client.sender import ModelStats


def take_report(service: Any, items: list[int]) -> dict[str, Any]:
    """What the worker's LLM service counted since the last report (plain data: it crosses
    processes); `items`: the block's items, whose failure tally moves to the driver. Counts
    are taken by subtraction, in place: another block running in the same worker goes on
    adding to the same counters, and its share stays for its own report."""
    service.flush()
    return {"stats": {name: _take(stats) for name, stats in list(service.stats.items())},
            "items": service.tally.take(items),
            "errors": dict(service.tally.last_errors),
            "breakers": dict(service.breakers),
            "calls": service.take_calls()}


def _take(counters: Any) -> dict[str, Any]:
    taken = dict(vars(counters))
    for name, value in taken.items():
        if isinstance(value, (int, float)):
            setattr(counters, name, getattr(counters, name) - value)
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
    service.breakers.update(report["breakers"])
    service.add_calls(report["calls"])
