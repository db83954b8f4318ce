"""The `http` transport: aiohttp in this process, or in a second one (http_process.py)
when `--http-process` says so.

At a few hundred calls a second one event loop cannot both run the pipeline (templates,
quote match, parsing, cache, logs, votes) and speak HTTP: it runs at one core's speed
while the model server waits. In a second process the HTTP work leaves the pipeline the
loop to itself (at 256 calls in flight on two cores, bench/RESULTS.md: 0.83x the wall
time for 1.07x the CPU). Below that rate it costs CPU and saves nothing, as each call
crosses between the processes twice (at 64 in flight: 1.01x the wall, 1.18x the CPU),
hence off by default.

- off: every call here.
- on: every call through the process, started at the first call.
- auto: calls here until the loop is busy (for WINDOWS windows in a row its thread used
  at least BUSY of the wall clock with at least MIN_IN_FLIGHT calls in flight), then new
  ones through the process: for long runs, as the switch and the second start-up cost
  what a run of a few seconds saves.

A process that cannot start, or ends, is said once on stderr; every call goes on here."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import TYPE_CHECKING, Any

from runner.llm.http_process import HTTPProcess, WorkerLost
from runner.llm.spec import ModelSpec
from runner.llm.transport import Completion

if TYPE_CHECKING:
    from runner.llm.aio_http import HTTPTransport

WINDOW = 0.2            # seconds of wall clock per look at the loop's CPU
BUSY = 0.9
WINDOWS = 3
MIN_IN_FLIGHT = 32


class LoopLoad:
    """Whether this thread's loop has been busy for WINDOWS windows in a row."""

    def __init__(self) -> None:
        self._wall = time.perf_counter()
        self._cpu = time.thread_time()
        self._streak = 0

    def busy(self, in_flight: int) -> bool:
        now = time.perf_counter()
        elapsed = now - self._wall
        if elapsed < WINDOW:
            return False
        cpu = time.thread_time()
        share = (cpu - self._cpu) / elapsed
        self._wall, self._cpu = now, cpu
        self._streak = self._streak + 1 if share >= BUSY and in_flight >= MIN_IN_FLIGHT else 0
        return self._streak >= WINDOWS


class SpillingHTTP:
    def __init__(self, mode: str = "auto") -> None:
        self._local: HTTPTransport | None = None
        self.mode = mode
        self.process: HTTPProcess | None = None
        self._starting: asyncio.Task[None] | None = None
        self._load: LoopLoad | None = None
        self._in_flight = 0

    async def complete(self, spec: ModelSpec, messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        process = await self._process()
        if process is not None:
            try:
                return await process.complete(spec, messages, params)
            except WorkerLost as lost:
                self._give_up(str(lost))
        self._in_flight += 1
        try:
            return await self.local().complete(spec, messages, params)
        finally:
            self._in_flight -= 1

    def local(self) -> HTTPTransport:
        if self._local is None:
            from runner.llm.aio_http import HTTPTransport
            self._local = HTTPTransport()
        return self._local

    async def _process(self) -> HTTPProcess | None:
        """The process to send this call through: None sends it here (meanwhile, while the
        process starts)."""
        if self.process is not None and self._starting is None:
            return self.process if self.process.alive else None
        if self.mode == "off":
            return None
        if self.mode == "on":
            if self._starting is None:
                self._start()
            assert self._starting is not None
            await asyncio.shield(self._starting)
            return self.process if self.process is not None and self.process.alive else None
        if self._starting is None:
            self._load = self._load or LoopLoad()
            if self._load.busy(self._in_flight):
                self._start()
        return None

    def _start(self) -> None:
        process = self.process = HTTPProcess()

        async def start() -> None:
            try:
                await process.start()
            except WorkerLost as lost:
                self._give_up(str(lost))
            finally:
                self._starting = None

        self._starting = asyncio.get_running_loop().create_task(start())

    def _give_up(self, reason: str) -> None:
        if self.mode != "off":
            sys.stderr.write(f"runner: the HTTP process stopped ({reason}): calls go on in this process\n")
            self.mode = "off"

    async def aclose(self) -> None:
        if self._starting is not None:
            await asyncio.shield(self._starting)
        if self.process is not None:
            await self.process.aclose()
        if self._local is not None:
            await self._local.aclose()
