"""The run's LimitsOwner (limits.py), served from the driver's event loop to its worker
processes over a Unix socket in a folder only this user can enter.

One connection per worker, one JSON line per request (`{"id", "call", "args"}`) and per
answer (`{"id", "result"}`); requests are answered as they complete, so a worker's calls
waiting for a permit hold up none of its others. A permit granted to a call that was
cancelled meanwhile is handed back at once."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from runner.engine.executors.limits import LimitsOwner
from runner.errors import RunnerError

CALLS = ("acquire", "release", "pace")


async def serve(owner: LimitsOwner, path: str) -> asyncio.Server:
    """Answer LimitsOwner's calls on the socket `path` until the server is closed."""

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answering: set[asyncio.Task[None]] = set()

        async def answer(request: dict[str, Any]) -> None:
            call = request["call"]
            if call not in CALLS:
                return
            result = getattr(owner, call)(*request["args"])
            if asyncio.iscoroutine(result):
                result = await result
            writer.write(json.dumps({"id": request["id"], "result": result}).encode() + b"\n")

        try:
            while line := await reader.readline():
                task = asyncio.ensure_future(answer(json.loads(line)))
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
        self._writer: asyncio.StreamWriter | None = None
        self._reading: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[str, asyncio.Future[Any]]] = {}

    async def connect(self) -> None:
        reader, self._writer = await asyncio.open_unix_connection(self._path)
        self._reading = asyncio.ensure_future(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while line := await reader.readline():
                answer = json.loads(line)
                call, future = self._waiting.pop(answer["id"])
                if not future.cancelled():
                    future.set_result(answer["result"])
                elif call == "acquire":          # its caller is gone: the permit goes back
                    self._send("release", [answer["result"]])
        except ConnectionError:
            pass
        for _, future in self._waiting.values():
            if not future.done():
                future.set_exception(RunnerError("the run's limits are gone: its driver stopped"))

    def _send(self, call: str, args: list[Any]) -> asyncio.Future[Any]:
        if self._writer is None:
            raise RunnerError("the run's limits are not connected")
        number = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._waiting[number] = (call, future)
        self._writer.write(json.dumps({"id": number, "call": call, "args": args}).encode() + b"\n")
        return future

    async def acquire(self, model: str, concurrency: int, lease_seconds: float) -> int:
        return int(await self._send("acquire", [model, concurrency, lease_seconds]))

    async def release(self, lease: int) -> None:
        await self._send("release", [lease])

    async def pace(self, model: str, per_minute: int) -> None:
        await self._send("pace", [model, per_minute])

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._reading is not None:
            await self._reading
