"""What the LLM services of one long-lived process share."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from runner.llm.cache.store import JsonCache
from runner.llm.client.routing import RoutedTransport
from runner.llm.client.sender import Sender
from runner.llm.client.transport import Transport
from runner.llm.writer import Writer


@dataclass
class SharedClient:
    """`runner serve`'s, for every request and job of a served pipeline: the sender (its limits,
    capacity, breakers and structured-output choices), the response cache, and one writer of
    answers, so an answer one service has not committed yet is found by the others (each keeps its
    own writer for its calls.jsonl). A service leaves them open; whoever made them closes them."""

    sender: Sender
    cache: JsonCache
    writer: Writer = field(default_factory=Writer)      # answers only: no calls.jsonl of its own

    @classmethod
    def open(cls, cache_dir: Path, concurrency: int, transport: Transport | None = None,
             concurrency_given: bool = False) -> SharedClient:
        """`transport`: what sends the calls (default: OpenAI-compatible HTTP, litellm for the rest)."""
        return cls(Sender(transport or RoutedTransport(), cache_dir, concurrency, concurrency_given),
                   JsonCache(cache_dir / "responses"))

    async def aclose(self) -> None:
        self.writer.close()
        await self.sender.aclose()
        self.cache.close()
