"""Each model's own transport, chosen by `spec.transport`."""

from __future__ import annotations

from typing import Any

from runner.llm.client.spec import ModelSpec
from runner.llm.client.transport import Completion, LiteLLMTransport, Transport


class RoutedTransport:
    """Each model's own transport (`spec.transport`): aiohttp for OpenAI-compatible
    endpoints, litellm for every other provider. Each is made on its model's first call,
    so a run that sends nothing imports neither aiohttp nor litellm."""

    def __init__(self) -> None:
        self._by_name: dict[str, Transport] = {}

    def _for(self, name: str) -> Transport:
        if name not in self._by_name:
            if name == "http":
                from runner.llm.client.aio_http import HTTPTransport
                self._by_name[name] = HTTPTransport()
            else:
                self._by_name[name] = LiteLLMTransport()
        return self._by_name[name]

    async def complete(self, spec: ModelSpec, messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        return await self._for(spec.transport).complete(spec, messages, params)

    async def aclose(self) -> None:
        for transport in self._by_name.values():
            await transport.aclose()
