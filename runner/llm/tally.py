"""What failed: items whose LLM work got no usable answer, endpoints that never answered.

An item counts as an error in the run's summary when its result has an `error`, or when
one of its llm/jury step runs got no usable answer from any model (an `llm` step whose
call failed, even if `on_error` let the item go on; a jury where no juror gave a valid
answer). A jury that lost some jurors but still voted is not an error."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class EndpointTally:
    answered: int = 0
    failed: int = 0
    last_error: str = ""


class FailureTally:
    def __init__(self) -> None:
        self._groups: dict[tuple[int, int], list[int]] = {}     # (item, group): [answered, failed]
        self._by_item: dict[int, list[tuple[int, int]]] = {}     # item: its groups, until settled
        self.endpoints: dict[str, EndpointTally] = {}
        self._reasons: dict[int, str] = {}                       # item: its last failed call's error

    def _group(self, item: int, group: int) -> list[int]:
        key = (item, group)
        if key not in self._groups:
            self._groups[key] = [0, 0]
            self._by_item.setdefault(item, []).append(key)
        return self._groups[key]

    def answer(self, item: int, group: int, endpoint: str | None) -> None:
        self._group(item, group)[0] += 1
        if endpoint is not None:
            self.endpoints.setdefault(endpoint, EndpointTally()).answered += 1

    def failure(self, item: int, group: int, endpoint: str | None, error: str) -> None:
        self._group(item, group)[1] += 1
        self._reasons[item] = error
        if endpoint is not None:
            tally = self.endpoints.setdefault(endpoint, EndpointTally())
            tally.failed += 1
            tally.last_error = error

    def settle(self, item: object) -> tuple[bool, str]:
        """Whether a finished item got no usable answer somewhere, and its last failed call's
        error; its groups are then forgotten, so a run's tally stays as small as its window."""
        failed = False
        for key in self._by_item.pop(item, []) if isinstance(item, int) else []:
            answered, failures = self._groups.pop(key)
            failed = failed or bool(failures and not answered)
        reason = self._reasons.pop(item, "") if isinstance(item, int) else ""
        return failed, reason

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

    def dead_endpoints(self) -> dict[str, EndpointTally]:
        """Endpoints that were sent requests and answered none of them."""
        return {name: t for name, t in self.endpoints.items() if t.failed and not t.answered}
