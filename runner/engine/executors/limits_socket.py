"""The run's LimitsOwner (limits.py), served from the driver's event loop to its worker
processes over a Unix socket in a folder only this user can enter.

One connection per worker, one JSON line per message: a request `{"id", "call", "args"}`,
an answer `{"id", "result"}`. `acquire` and `pace` are answered as they complete, so a
worker's calls waiting for a permit hold up none of its others; `release` is not answered
(a later request on the same connection is read after it). The lines written in one turn
of an event loop go out together. A permit granted to a call that was cancelled meanwhile
is handed back at once."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from typing import Any

from runner.engine.executors.limits import LimitsOwner
from runner.errors import RunnerError


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
