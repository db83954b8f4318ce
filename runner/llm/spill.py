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

A process that cannot start, or ends, is said once on stderr; its unanswered calls and
every later one are sent from this process."""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any

from runner.llm.http_process import HTTPProcess, WorkerLost
from runner.llm.spec import ModelSpec
from runner.llm.transport import Completion

if TYPE_CHECKING:
    from runner.llm.aio_http import HTTPTransport


class SpillingHTTP:
    def __init__(self) -> None:
        self.process: HTTPProcess | None = HTTPProcess()
        self._starting: asyncio.Task[None] | None = None
        self._local: HTTPTransport | None = None

    async def complete(self, spec: ModelSpec, messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        process = await self._started()
        if process is not None:
            try:
                return await process.complete(spec, messages, params)
            except WorkerLost as lost:
                self._give_up(str(lost))
        return await self.local().complete(spec, messages, params)

    async def _started(self) -> HTTPProcess | None:
        """The process, started on the first call; None once it is given up."""
        if self.process is None:
            return None
        if self._starting is None:
            self._starting = asyncio.get_running_loop().create_task(self.process.start())
        try:
            await asyncio.shield(self._starting)      # started: at once
        except WorkerLost as lost:
            self._give_up(str(lost))
        return self.process

    def local(self) -> HTTPTransport:
        """This process's transport: aiohttp is imported here only when a call needs it."""
        if self._local is None:
            from runner.llm.aio_http import HTTPTransport
            self._local = HTTPTransport()
        return self._local

    def _give_up(self, reason: str) -> None:
        if self.process is not None:
            sys.stderr.write(f"runner: the HTTP process stopped ({reason}): calls go on in this process\n")
            self.process = None

    async def aclose(self) -> None:
        if self._starting is not None:
            await asyncio.gather(self._starting, return_exceptions=True)
        process, self.process = self.process, None
        if process is not None:
            await process.aclose()
        if self._local is not None:
            await self._local.aclose()
