"""What failed: items whose LLM work got no usable answer, models whose every call failed.

An item counts as an error in the run's summary when its result has an `error`, or when
one of its llm/jury step runs got no usable answer from any model (an `llm` step whose
call failed, even if `on_error` let the item go on; a jury where no juror gave a valid
answer). A jury that lost some jurors but still voted is not an error.

Per model, the calls this run sent are counted: those answered and those that failed. An
answer from the cache is not a call sent, so a model whose sent calls all failed is named
by the run's hint (`failed_calls`) even when the cache answered it elsewhere, and a model
the cache answered alone is never named."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass
class ModelTally:
    endpoint: str = ""
    answered: int = 0          # calls sent that got a usable answer
    failed: int = 0            # calls sent that failed (after their retries)
    last_error: str = ""


class FailureTally:
    def __init__(self) -> None:
        self._groups: dict[tuple[int, int], list[int]] = {}     # (item, group): [answered, failed]
        self._by_item: dict[int, list[tuple[int, int]]] = {}     # item: its groups, until settled
        self.models: dict[str, ModelTally] = {}                  # model name: its calls sent
        self._reasons: dict[int, str] = {}                       # item: its last failed call's error

    def _group(self, item: int, group: int) -> list[int]:
        key = (item, group)
        if key not in self._groups:
            self._groups[key] = [0, 0]
            self._by_item.setdefault(item, []).append(key)
        return self._groups[key]

    def answer(self, item: int, group: int, model: str, endpoint: str, sent: bool) -> None:
        """A usable answer; `sent`: by a call this run sent (else from the cache)."""
        self._group(item, group)[0] += 1
        if sent:
            self.models.setdefault(model, ModelTally(endpoint)).answered += 1

    def failure(self, item: int, group: int, model: str, endpoint: str, error: str) -> None:
        self._group(item, group)[1] += 1
        self._reasons[item] = error
        tally = self.models.setdefault(model, ModelTally(endpoint))
        tally.failed += 1
        tally.last_error = error

    def settle(self, item: object) -> tuple[bool, str]:
        """Whether a finished item got no usable answer somewhere, and its last failed call's
        error; its groups are then forgotten, so a run's tally stays as small as its window."""
        taken = self.take([item]) if isinstance(item, int) else []
        if not taken:
            return False, ""
        _, groups, reason = taken[0]
        return any(failed and not answered for _, answered, failed in groups), reason

    def has_failed(self, item: int) -> bool:
        """Whether an item has, so far, a call group that failed and was never answered: what
        settle will say, read without forgetting anything (the run's error count settles it)."""
        return any(self._groups[key][1] and not self._groups[key][0] for key in self._by_item.get(item, []))

    def take(self, items: list[int]) -> list[tuple[int, list[tuple[int, int, int]], str]]:
        """These items' groups and last errors, removed: a Ray worker sends them to the driver."""
        taken = []
        for item in items:
            groups = []
            for key in self._by_item.pop(item, []):
                answered, failed = self._groups.pop(key)
                groups.append((key[1], answered, failed))
            reason = self._reasons.pop(item, "")
            if groups or reason:
                taken.append((item, groups, reason))
        return taken

    def absorb(self, taken: list[tuple[int, list[tuple[int, int, int]], str]]) -> None:
        """Items a Ray worker counted (`take`), counted here as if this process had."""
        for item, groups, reason in taken:
            for group, answered, failed in groups:
                counts = self._group(item, group)
                counts[0] += answered
                counts[1] += failed
            if reason:
                self._reasons[item] = reason

    def absorb_models(self, taken: dict[str, dict[str, Any]]) -> None:
        """A worker's per-model counts (`vars` of its ModelTally), added to these."""
        for name, counted in taken.items():
            mine = self.models.setdefault(name, ModelTally(counted["endpoint"]))
            mine.answered += counted["answered"]
            mine.failed += counted["failed"]
            mine.last_error = counted["last_error"] or mine.last_error

    def failed_calls(self, unreachable: dict[str, str]) -> list[dict[str, Any]]:
        """Per endpoint, the models whose every call this run sent failed, and the hint the run
        prints about them (`unreachable`: endpoint -> why its breaker opened); kept in
        summary.json (`failed_calls`) so that it can be checked against calls.jsonl later."""
        by_endpoint: dict[str, dict[str, Any]] = {}
        last: dict[str, str] = {}
        for name in sorted(self.models):
            tally = self.models[name]
            if tally.failed and not tally.answered:
                entry = by_endpoint.setdefault(tally.endpoint, {"endpoint": tally.endpoint, "models": [], "failed": 0})
                entry["models"].append(name)
                entry["failed"] += tally.failed
                last[tally.endpoint] = tally.last_error
        for endpoint, entry in by_endpoint.items():
            names = entry["models"]
            entry["hint"] = (f"{', '.join(names)} unreachable ({unreachable[endpoint]}): start a model server there "
                             f"(LM Studio, Ollama, llama.cpp), point it elsewhere with --set models.{names[0]}.api_base"
                             f"=URL, or set the provider's API key." if endpoint in unreachable else
                             f"every call to {', '.join(names)} at {endpoint} failed ({entry['failed']} call(s)); "
                             f"the last: {last[endpoint]}")
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
