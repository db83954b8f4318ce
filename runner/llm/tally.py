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
        self.endpoints: dict[str, EndpointTally] = {}
        self._reasons: dict[int, str] = {}                       # item: its last failed call's error

    def answer(self, item: int, group: int, endpoint: str | None) -> None:
        self._groups.setdefault((item, group), [0, 0])[0] += 1
        if endpoint is not None:
            self.endpoints.setdefault(endpoint, EndpointTally()).answered += 1

    def failure(self, item: int, group: int, endpoint: str | None, error: str) -> None:
        self._groups.setdefault((item, group), [0, 0])[1] += 1
        self._reasons[item] = error
        if endpoint is not None:
            tally = self.endpoints.setdefault(endpoint, EndpointTally())
            tally.failed += 1
            tally.last_error = error

    def failed_items(self) -> set[int]:
        return {item for (item, _), (answered, failed) in self._groups.items() if failed and not answered}

    def failure_reasons(self) -> dict[int, str]:
        """Each failed item's last call error (what the run's grouped error lines show)."""
        return {item: self._reasons.get(item, "") for item in self.failed_items()}

    def dead_endpoints(self) -> dict[str, EndpointTally]:
        """Endpoints that were sent requests and answered none of them."""
        return {name: t for name, t in self.endpoints.items() if t.failed and not t.answered}
