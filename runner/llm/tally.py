"""What failed: items whose LLM work got no usable answer, models whose every call failed.

An item's LLM work failed when one of its llm/jury step runs got no usable answer from any
model (a failed `llm` call `on_error` let pass; a jury with no valid vote), or a jury that lost
jurors to failed calls and so missed its quorum (`no_verdict`), not when a jury lost some
jurors but still voted (the rule: runner/engine/health.py's item_end).

Per model, the calls this run sent are counted (ModelStats): answered and failed. An answer
from the cache is not a call sent, so a model whose sent calls all failed is named by the run's
hint (`failed_calls`) even when the cache answered it elsewhere, and one the cache answered
alone never is.

An executor whose blocks run in other processes (Ray's) gets a worker's accounting back with each
block (`take_report`) and takes it in (`absorb_report`), so summary.json and calls.jsonl read as a
local run's (the worker's service, `RunRole.worker`, keeps its calls' lines for it instead of
writing a calls.jsonl). Counts are taken and reset after each block: a block retried elsewhere
after its worker died is counted once, by the worker that finished it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.llm.client.sender import ModelStats


@dataclass
class ItemTally:
    groups: dict[int, list[int]] = field(default_factory=dict)     # group: [answered, failed]
    reason: str = ""           # its last failed call's error
    sent: bool = False         # it sent a call (or had one fail)
    undecided: str = ""        # why a jury of it missed its quorum for failed calls (every cause, in seat order)


class FailureTally:
    def __init__(self) -> None:
        self._items: dict[int, ItemTally] = {}         # until settled
        self.last_errors: dict[str, tuple[str, str]] = {}      # model name: (endpoint, its last failed call's error)

    def _group(self, item: int, group: int) -> tuple[ItemTally, list[int]]:
        tally = self._items.setdefault(item, ItemTally())
        return tally, tally.groups.setdefault(group, [0, 0])

    def answer(self, item: int, group: int, sent: bool) -> None:
        """A usable answer; `sent`: by a call this run sent (else from the cache)."""
        tally, counts = self._group(item, group)
        counts[0] += 1
        tally.sent = tally.sent or sent

    def failure(self, item: int, group: int, model: str, endpoint: str, error: str) -> None:
        tally, counts = self._group(item, group)
        counts[1] += 1
        tally.reason, tally.sent = error, True
        self.last_errors[model] = (endpoint, error)

    def no_verdict(self, item: int, reason: str) -> None:
        """A jury of `item` missed its quorum because calls failed: its LLM work failed, as if no
        juror had answered (the jurors that did are still answers), and `reason` says why (the
        first such jury's: the same whichever call failed last)."""
        tally = self._items.setdefault(item, ItemTally())
        tally.undecided = tally.undecided or reason

    def settle(self, item: object, keep: bool = False) -> tuple[bool, str, bool, bool]:
        """Whether a finished item got no usable answer somewhere, why (a jury's `no_verdict`,
        else its last failed call's error),
        whether every answer it got came from the cache (and it got one), and whether it got one
        at all. Its groups are then forgotten, so a run's tally stays as small as its window;
        `keep` only reads them."""
        tally = None if not isinstance(item, int) else self._items.get(item) if keep else self._items.pop(item, None)
        if tally is None:
            return False, "", False, False
        failed = bool(tally.undecided) or any(failed and not answered for answered, failed in tally.groups.values())
        answered = any(answered for answered, _ in tally.groups.values())
        return failed, tally.undecided or tally.reason, answered and not tally.sent, answered

    def take(self, items: list[int]) -> dict[int, ItemTally]:
        """These items' tallies, removed: a Ray worker sends them to the driver."""
        return {item: tally for item in items if (tally := self._items.pop(item, None)) is not None}

    def absorb(self, taken: dict[int, ItemTally]) -> None:
        """Items a Ray worker counted (`take`), counted here as if this process had."""
        for item, theirs in taken.items():
            mine = self._items.setdefault(item, ItemTally())
            for group, (answered, failed) in theirs.groups.items():
                counts = mine.groups.setdefault(group, [0, 0])
                counts[0] += answered
                counts[1] += failed
            mine.reason, mine.sent = theirs.reason or mine.reason, mine.sent or theirs.sent
            mine.undecided = mine.undecided or theirs.undecided

    def failed_calls(self, stats: Mapping[str, ModelStats], unreachable: dict[str, str]) -> list[dict[str, Any]]:
        """Per endpoint, the models whose every call this run sent failed (by their `stats`), and
        the hint the run prints about them (`unreachable`: endpoint -> why its breaker opened);
        kept in summary.json (`failed_calls`) so that it can be checked against calls.jsonl later."""
        by_endpoint: dict[str, dict[str, Any]] = {}
        last: dict[str, str] = {}
        for name in sorted(self.last_errors):
            endpoint, last_error = self.last_errors[name]
            counts = stats.get(name) or ModelStats()
            if counts.failures and not counts.answered:
                entry = by_endpoint.setdefault(endpoint, {"endpoint": endpoint, "models": [], "failed": 0})
                entry["models"].append(name)
                entry["failed"] += counts.failures
                entry["cached"] = entry.get("cached", 0) + counts.cache_hits
                last[endpoint] = last_error
        for endpoint, entry in by_endpoint.items():
            names = entry["models"]
            entry["hint"] = (f"{', '.join(names)} unreachable ({unreachable[endpoint]}): start a model server there "
                             f"(LM Studio, Ollama, llama.cpp), point it elsewhere with --set models.{names[0]}.api_base"
                             f"=URL, or set the provider's API key." if endpoint in unreachable else
                             f"every call {'sent ' if entry['cached'] else ''}to {', '.join(names)} at {endpoint} "
                             f"failed ({entry['failed']} call(s)"
                             + (f"; the cache answered {entry['cached']} other(s)" if entry["cached"] else "")
                             + f"); the last: {last[endpoint]}")
        return list(by_endpoint.values())


def borne_out(entries: list[dict[str, Any]], calls: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `failed_calls` entries a run's calls (its calls.jsonl records, read once) still bear
    out: each entry's models sent calls to its endpoint, as many failed, and none got an answer."""
    sent: Counter[tuple[str, str | None, bool]] = Counter()     # (model, endpoint, failed): calls sent
    for call in calls:
        model, endpoint = call.get("model"), call.get("endpoint")
        if isinstance(model, str) and isinstance(endpoint, (str, type(None))) and not call.get("cached"):
            sent[model, endpoint, bool(call.get("error"))] += 1
    held = []
    for entry in entries:
        models, endpoint = set(entry.get("models") or []), entry.get("endpoint")
        if not isinstance(endpoint, (str, type(None))):
            continue
        failed = sum(sent[model, endpoint, True] for model in models)
        answered = sum(sent[model, endpoint, False] for model in models)
        if models and answered == 0 and failed >= int(entry.get("failed") or 0) > 0:
            held.append(entry)
    return held


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
        for key, value in counted.items():
            setattr(stats, key, getattr(stats, key) + value)
        service.spec(name)                      # hints name the models of an endpoint
    service.tally.absorb(report["items"])
    service.tally.last_errors.update(report["errors"])
    service.sender.breakers.update(report["breakers"])
    service.add_calls(report["calls"])
