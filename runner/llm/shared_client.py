"""What the LLM services of one long-lived process share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from runner.llm.routing import RoutedTransport
from runner.llm.sender import Sender
from runner.llm.transport import Transport
from runner.stores.json_cache import JsonCache


@dataclass
class SharedClient:
    """What the LLM services of one long-lived process share (`runner serve`: every request
    and job of a served pipeline): the sender, with its limits, capacity, breakers and
    structured-output choices, and the response cache. A service given one uses it and leaves
    it open; whoever made it closes it (`aclose`)."""

    sender: Sender
    cache: JsonCache

    @classmethod
    def open(cls, cache_dir: Path, concurrency: int, transport: Transport | None = None,
             concurrency_given: bool = False) -> SharedClient:
        """`transport`: what sends the calls (default: OpenAI-compatible HTTP, litellm for the rest)."""
        return cls(Sender(transport or RoutedTransport("off"), cache_dir, concurrency, concurrency_given),
                   JsonCache(cache_dir / "responses"))

    async def aclose(self) -> None:
        await self.sender.aclose()
        self.cache.close()
