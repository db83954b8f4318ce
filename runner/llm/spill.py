"""`--http-process on`: the `http` transport's calls sent from a second process
(http_process.py), and from this one if that process cannot start or ends.

At a few hundred calls a second one event loop cannot both run the pipeline (templates,
quote match, parsing, cache, logs, votes) and speak HTTP: it runs at one core's speed
while the model server waits. In a second process the HTTP work leaves the pipeline the
loop to itself. Below that rate it costs CPU and saves nothing, as each call crosses
between the processes twice; hence off by default (bench/RESULTS.md, issue 26's eighth
round, two cores shared with the server: at 256 calls in flight 0.83-0.94x the wall time
for 1.07-1.17x the CPU, and runner's own process 0.72x the CPU; at 64, where the server
sets the pace, 1.01x the wall time for 1.18x the CPU).

A process that cannot start, or ends, is said once on stderr. A call it had not answered
fails its attempt (the request may have reached the server), which the sender retries
like any other; that retry and every later call are sent from this process."""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any

from runner.llm.http_process import HTTPProcess, WorkerLost
from runner.llm.spec import ModelSpec
from runner.llm.transport import Completion, TransportError
from runner.redact import redact

if TYPE_CHECKING:
    from runner.llm.aio_http import HTTPTransport


class SpillingHTTP:
    def __init__(self) -> None:
        self.process = HTTPProcess()
        self._starting: asyncio.Task[None] | None = None
        self._given_up = False
        self._closing = False
        self._local: HTTPTransport | None = None

    async def prepare(self) -> None:
        """Start the process (once), before a call's deadline starts counting."""
        if self._given_up:
            return
        if self._starting is None:
            self._starting = asyncio.get_running_loop().create_task(self.process.start())
        try:
            await asyncio.shield(self._starting)      # started: at once
        except WorkerLost as lost:
            self._give_up(str(lost))

    async def complete(self, spec: ModelSpec, messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        if self._closing:
            raise TransportError("connection", "the run is ending")
        await self.prepare()
        if self._given_up:
            return await self.local().complete(spec, messages, params)
        try:
            return await self.process.complete(spec, messages, params)
        except WorkerLost as lost:
            # The request may have reached the server: a failed attempt, retried (and
            # counted) by the sender like any other, and sent from here from now on.
            self._give_up(str(lost))
            raise TransportError("connection", f"the HTTP process ended before the answer came ({lost})") from None

    def local(self) -> HTTPTransport:
        """This process's transport: aiohttp is imported here only when a call needs it."""
        if self._local is None:
            from runner.llm.aio_http import HTTPTransport
            self._local = HTTPTransport()
        return self._local

    def _give_up(self, reason: str) -> None:
        if not self._given_up and not self._closing:
            sys.stderr.write(redact(f"runner: the HTTP process stopped ({reason}): calls go on in this process\n"))
        self._given_up = True

    async def aclose(self) -> None:
        self._closing = True
        if self._starting is not None:
            await asyncio.gather(self._starting, return_exceptions=True)
        await self.process.aclose()
        if self._local is not None:
            await self._local.aclose()
