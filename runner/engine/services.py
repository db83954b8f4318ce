"""What the engine, its steps and a run's end ask of the run's LLM service (runner/llm/service.py,
made by the Runtime on first use), as a Protocol mypy checks every such call against. (A
worker's accounting, runner/llm/tally.py's take_report, reads the service itself.)"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from runner.llm.request import CallRequest, new_group

__all__ = ["LLM", "CallRequest", "CallStats", "new_group"]


class CallStats(Protocol):
    """One model's counts so far (the progress line reads them)."""

    calls: int
    cache_hits: int
    failures: int


class LLM(Protocol):
    @property
    def stats(self) -> Mapping[str, CallStats]: ...

    def enabled(self, name: str) -> bool:
        """Whether the model `name` under models: takes calls in this run."""
        ...

    async def call(self, request: CallRequest) -> dict[str, Any]:
        """The answer to one request (cached or sent), or StepError; either says how many
        requests it took (`calls`: a re-ask to repair an answer is one more) and the attempts
        they were sent in (`attempts`: retries included, none for a cached answer)."""
        ...

    def hide_secrets(self, text: str) -> str:
        """What a model wrote or was sent, its known secrets hidden by value only."""
        ...

    def no_verdict(self, item: int, reason: str) -> None:
        """A jury of `item` missed its quorum because calls failed: the item counts as failed, for `reason`."""
        ...

    def settle(self, item: object, keep: bool = False) -> tuple[bool, str, bool, bool]:
        """A finished item: whether its LLM work got no usable answer, why, whether the cache gave
        every answer it got, and whether it got any; forgotten unless `keep`
        (runner/engine/health.py: item_end)."""
        ...

    def summary(self, results: Any) -> dict[str, Any]:
        """summary.json's LLM part: per model counts, tokens and cost, hints, batches."""
        ...

    def progress_note(self) -> str: ...

    def add_calls(self, lines: list[bytes]) -> None:
        """Lines of calls.jsonl made elsewhere (an earlier run's, taken up), appended to this run's."""
        ...

    def flush(self) -> None:
        """Write the answers and lines of calls.jsonl handed over so far."""
        ...

    async def aclose(self) -> None: ...
