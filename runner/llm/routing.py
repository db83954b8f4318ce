"""Each model's own transport, chosen by `spec.transport`."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from runner.errors import RunnerError
from runner.llm.spec import ModelSpec
from runner.llm.transport import Completion, LiteLLMTransport, Transport

HTTP_PROCESS_MODES = ("on", "off")


def http_process_mode(asked: str) -> str:
    """`--http-process`, as this system allows: off where a socket cannot be handed to a
    child process (Windows)."""
    if asked not in HTTP_PROCESS_MODES:
        raise RunnerError(f"--http-process {asked}: choose from {', '.join(HTTP_PROCESS_MODES)}")
    return asked if os.name == "posix" else "off"


class RoutedTransport:
    """Each model's own transport (`spec.transport`): aiohttp for OpenAI-compatible
    endpoints (from a second process with `--http-process on`: spill.py), litellm (imported
    on its first call only) for every other provider."""

    def __init__(self, http_process: str = "off") -> None:
        self._by_name: dict[str, Transport] = {}
        self.http_process = http_process        # on or off (spill.py)
        # The sender's set-up step before each call (starting the HTTP process): none when
        # off, so the default path awaits nothing more per call.
        self.prepare: Callable[[ModelSpec], Awaitable[None]] | None = self._prepare if http_process == "on" else None

    def _for(self, name: str) -> Transport:
        if name not in self._by_name:
            if name == "http":
                if self.http_process == "on":
                    from runner.llm.spill import SpillingHTTP
                    self._by_name[name] = SpillingHTTP()
                else:
                    from runner.llm.aio_http import HTTPTransport  # aiohttp is imported on the first uncached call
                    self._by_name[name] = HTTPTransport()
            else:
                self._by_name[name] = LiteLLMTransport()
        return self._by_name[name]

    async def _prepare(self, spec: ModelSpec) -> None:
        prepare = getattr(self._for(spec.transport), "prepare", None)
        if prepare is not None:
            await prepare()

    async def complete(self, spec: ModelSpec, messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        return await self._for(spec.transport).complete(spec, messages, params)

    async def aclose(self) -> None:
        for transport in self._by_name.values():
            await transport.aclose()
