"""What the LLM services of one long-lived process share."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from runner.llm.routing import RoutedTransport
from runner.llm.sender import Sender
from runner.llm.transport import Transport
from runner.llm.writer import BackgroundWriter
from runner.stores.json_cache import JsonCache


@dataclass
class SharedClient:
    """What the LLM services of one long-lived process share (`runner serve`: every request
    and job of a served pipeline): the sender, with its limits, capacity, breakers and
    structured-output choices, and the response cache. A service given one uses it and leaves
    it open; whoever made it closes it (`aclose`). The services share one writer too, so an
    answer one of them has not committed yet is found by the others."""

    sender: Sender
    cache: JsonCache
    writer: BackgroundWriter = field(default_factory=BackgroundWriter)

    @classmethod
    def open(cls, cache_dir: Path, concurrency: int, transport: Transport | None = None,
             concurrency_given: bool = False) -> SharedClient:
        """`transport`: what sends the calls (default: OpenAI-compatible HTTP, litellm for the rest)."""
        return cls(Sender(transport or RoutedTransport("off"), cache_dir, concurrency, concurrency_given),
                   JsonCache(cache_dir / "responses"))

    async def aclose(self) -> None:
        self.writer.close()
        await self.sender.aclose()
        self.cache.close()
