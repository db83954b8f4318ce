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
    """What the LLM services of one long-lived process share (`runner serve`: every request
    and job of a served pipeline): the sender, with its limits, capacity, breakers and
    structured-output choices, and the response cache. A service given one uses it and leaves
    it open; whoever made it closes it (`aclose`). The services hand their answers to one
    writer too, so an answer one of them has not committed yet is found by the others; each
    service keeps its own writer for its run's calls.jsonl."""

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
