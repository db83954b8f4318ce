"""`--executor processes`: blocks of items run in `--workers` spawned processes on this machine
(default: one per CPU), through the driver (driver.py).

Each process keeps one event loop and one BlockWorker for its life, runs the blocks the pool
hands it one at a time, and opens the LLM cache and the daily budgets itself (diskcache folders
are safe across processes). The driver's event loop serves the models' limits (limits.py) to
them over a Unix socket, so a model's `concurrency` and `requests_per_minute` hold for the run
as a whole. Ctrl-C is the driver's: a worker ignores SIGINT, and the stop event ends any block
still running when the run ends or stops, with the answer of the items it finished.

The socket is in a folder only this user can enter; one connection per worker, one JSON line
per message: a request `{"id", "call", "args"}`, an answer `{"id", "result"}`. `acquire` and
`pace` are answered as they complete, so a call waiting for a permit holds up no other;
`release` is not answered (a later request on the connection is read after it). The lines
written in one turn of an event loop go out together. A permit granted to a call cancelled
meanwhile is handed back at once."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import itertools
import json
import multiprocessing
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing.synchronize import Event
from typing import Any

from runner.engine.context import Runtime
from runner.engine.executors.choice import ExecutorChoice
from runner.engine.executors.driver import BlockRunner, BlockWorker, absolute
from runner.engine.executors.limits import LimitsOwner, SharedLimits
from runner.errors import RunnerError
from runner.inputs import Item
from runner.llm.cache.store import open_caches
from runner.llm.client.limits import DailyBudget
from runner.pipeline.model import Pipeline
from runner.runs.request import RunOptions

PARENT_CHECK_SECONDS = 1.0    # how soon a worker whose driver died (kill -9) ends itself


@contextlib.asynccontextmanager
async def on_processes(choice: ExecutorChoice, runtime: Runtime) -> AsyncIterator[BlockRunner]:
    options = absolute(runtime.options)
    workers = choice.workers or os.cpu_count() or 1
    folder = tempfile.mkdtemp(prefix="runner-")          # only this user may enter it
    try:
        path = os.path.join(folder, "limits")
        server = await serve(LimitsOwner(options.cache_dir), path)
        context = multiprocessing.get_context("spawn")
        stop = context.Event()
        pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_start,
                                   initargs=(runtime.pipeline, options, runtime.role.kind, os.getcwd(), path,
                                             stop, workers, os.getpid()))
        try:
            yield BlockRunner(workers, functools.partial(_submit, pool), stop.set)
        finally:
            stop.set()          # a block still running ends now
            await asyncio.to_thread(pool.shutdown, wait=True, cancel_futures=True)
            server.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def _submit(pool: ProcessPoolExecutor, worker: int, block: list[Item], concurrency: int) -> dict[str, Any]:
    """A block run by any free process of the pool (`worker` only counts the slots)."""
    try:
        answer: dict[str, Any] = await asyncio.wrap_future(pool.submit(_run_block, block, concurrency))
    except BrokenProcessPool as exc:
        raise RunnerError(f"--executor processes: a worker process ended before its block did ({exc})") from None
    return answer


@dataclass
class _Process:
    """What a worker process keeps for its life."""

    loop: asyncio.AbstractEventLoop
    worker: BlockWorker
    limits: LimitsClient


_this: _Process | None = None


def _start(pipeline: Pipeline, options: RunOptions, kind: str, cwd: str, limits_path: str, stop: Event,
           workers: int, driver: int) -> None:
    """The pool's initializer: this process's loop, worker and connection to the run's limits
    (`kind`: the run's RunRole.kind; `workers`: how many processes the pool has; `driver`: its pid)."""
    global _this
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_end_with, args=(driver,), daemon=True, name="runner-driver-watch").start()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    client = LimitsClient(limits_path)
    loop.run_until_complete(client.connect())
    limits = SharedLimits(client, lambda: DailyBudget(options.cache_dir), workers * options.llm_concurrency)
    worker = BlockWorker(pipeline, options, kind, cwd, open_caches(pipeline, options.cache_dir), limits, stop.is_set)
    _this = _Process(loop, worker, client)
    atexit.register(_close)


def _end_with(driver: int) -> None:
    """A worker outlives no driver: one killed (kill -9) leaves its pool's processes waiting on
    a queue no one writes, or sending the calls of a block no one will read."""
    while os.getppid() == driver:
        time.sleep(PARENT_CHECK_SECONDS)
    os._exit(1)


def _run_block(items: list[Item], concurrency: int) -> dict[str, Any]:
    """One block's answer (driver.py): once the driver stops the run, that of the items finished."""
    if _this is None:
        raise RunnerError("this worker process was never started")
    return _this.loop.run_until_complete(_this.worker.run_block(items, concurrency))


def _close() -> None:
    """At exit (a spawned process ends through sys.exit): the worker's Runtime, then its connection."""
    if _this is not None:
        _this.loop.run_until_complete(_this.worker.close())
        _this.loop.run_until_complete(_this.limits.close())
        _this.loop.close()


class Lines:
    """JSON lines to one stream, sent together once the event loop's turn ends."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self._waiting: list[bytes] = []

    def send(self, message: dict[str, Any]) -> None:
        if not self._waiting:
            asyncio.get_running_loop().call_soon(self._flush)
        self._waiting.append(json.dumps(message).encode() + b"\n")

    def _flush(self) -> None:
        lines, self._waiting = self._waiting, []
        if not self.writer.is_closing():
            self.writer.write(b"".join(lines))


async def serve(owner: LimitsOwner, path: str) -> asyncio.Server:
    """Answer LimitsOwner's calls on the socket `path` until the server is closed."""

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lines = Lines(writer)
        answering: set[asyncio.Task[None]] = set()

        async def answer(number: int, waited: Any) -> None:
            lines.send({"id": number, "result": await waited})

        try:
            while line := await reader.readline():
                request = json.loads(line)
                call, args = request["call"], request["args"]
                if call == "release":
                    owner.release(*args)
                elif call in ("acquire", "pace"):
                    task = asyncio.ensure_future(answer(request["id"], getattr(owner, call)(*args)))
                    answering.add(task)
                    task.add_done_callback(answering.discard)
        except (ConnectionError, ValueError):
            pass
        finally:
            for task in answering:
                task.cancel()
            writer.close()

    return await asyncio.start_unix_server(connection, path)


class LimitsClient:
    """LimitsOwner's calls, asked of the driver from a worker process's event loop."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._lines: Lines | None = None
        self._reading: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[str, asyncio.Future[Any]]] = {}

    async def connect(self) -> None:
        reader, writer = await asyncio.open_unix_connection(self._path)
        self._lines = Lines(writer)
        self._reading = asyncio.ensure_future(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(ConnectionError):
            while line := await reader.readline():
                answer = json.loads(line)
                call, future = self._waiting.pop(answer["id"])
                if not future.cancelled():
                    future.set_result(answer["result"])
                elif call == "acquire":          # its caller is gone: the permit goes back
                    self._send("release", [answer["result"]])
        for _, future in self._waiting.values():
            if not future.done():
                future.set_exception(RunnerError("the run's limits are gone: its driver stopped"))

    def _send(self, call: str, args: list[Any]) -> int:
        if self._lines is None:
            raise RunnerError("the run's limits are not connected")
        number = next(self._ids)
        self._lines.send({"id": number, "call": call, "args": args})
        return number

    async def _ask(self, call: str, args: list[Any]) -> Any:
        future = asyncio.get_running_loop().create_future()
        self._waiting[self._send(call, args)] = (call, future)
        return await future

    async def acquire(self, model: str, concurrency: int, lease_seconds: float) -> int:
        return int(await self._ask("acquire", [model, concurrency, lease_seconds]))

    async def release(self, lease: int) -> None:
        self._send("release", [lease])

    async def pace(self, model: str, per_minute: int) -> None:
        await self._ask("pace", [model, per_minute])

    async def close(self) -> None:
        if self._lines is not None:
            self._lines.writer.close()
        if self._reading is not None:
            await self._reading
