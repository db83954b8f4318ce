"""An in-process scripted model: a Transport (runner/llm/transport.py) that answers by prompt
substring without HTTP, records every prompt it was sent, and can hold its answers until
released. For engine and `runner serve` tests that are not about HTTP itself."""

from __future__ import annotations

import asyncio
from typing import Any

from runner.llm.client.spec import ModelSpec
from runner.llm.client.transport import Completion, TransportError


class ScriptedModel:
    def __init__(self, default: str = '{"verdict": "yes"}') -> None:
        self.default = default
        self.rules: list[tuple[str, str]] = []
        self.prompts: list[str] = []
        self.in_flight = 0
        self.peak = 0
        self.held: asyncio.Event | None = None
        self.failing: str | None = None

    def answer(self, text: str, contains: str) -> None:
        """Answer `text` to any prompt holding `contains` (the first matching rule wins)."""
        self.rules.append((contains, text))

    def hold(self) -> None:
        """Keep every answer back until `release` (a call in flight stays in flight)."""
        self.held = asyncio.Event()

    def release(self) -> None:
        if self.held is not None:
            self.held.set()

    def calls(self, contains: str = "") -> list[str]:
        return [p for p in self.prompts if contains in p]

    async def complete(self, spec: ModelSpec, messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        prompt = "\n".join(str(m.get("content", "")) for m in messages)
        self.prompts.append(prompt)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(0)
            if self.held is not None:
                await self.held.wait()
            if self.failing is not None:
                raise TransportError("server", self.failing, 500)
            text = next((t for contains, t in self.rules if contains in prompt), self.default)
            return Completion(text, "stop", {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                              0.0, spec.model)
        finally:
            self.in_flight -= 1

    async def aclose(self) -> None:
        pass
