"""The HTTP process (see http_process.py): `python -m runner.llm.http_worker FD`, FD its
end of the socket pair. It sends each call with the in-process transport (aio_http.py)
and answers with what it got, until the socket closes."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from typing import Any

from runner.llm.aio_http import HTTPTransport
from runner.llm.frames import FrameChannel
from runner.llm.spec import ModelSpec
from runner.llm.transport import TransportError
from runner.redact import redact


class Worker:
    def __init__(self) -> None:
        self.transport = HTTPTransport()
        self.specs: dict[int, ModelSpec] = {}
        self.calls: dict[int, asyncio.Task[None]] = {}
        self.ended = asyncio.get_running_loop().create_future()
        self.channel = FrameChannel(self.receive, self.closed)

    def receive(self, message: tuple[Any, ...]) -> None:
        if message[0] == "spec":
            self.specs[message[1]] = message[2]
        elif message[0] == "cancel":
            task = self.calls.get(message[1])
            if task is not None:
                task.cancel()
        else:
            call, token, messages, params = message
            self.calls[call] = asyncio.get_running_loop().create_task(
                self.send(call, self.specs[token], messages, params))

    async def send(self, call: int, spec: ModelSpec, messages: list[dict[str, Any]], params: dict[str, Any]) -> None:
        try:
            done = await self.transport.complete(spec, messages, params)
            self.channel.send((call, "ok", (done.text, done.finish_reason, done.usage, done.cost, done.model,
                                            done.choices)))
        except TransportError as exc:
            self.channel.send((call, "error", (exc.kind, exc.message, exc.status, exc.retry_after, exc.body)))
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # noqa: BLE001 - a defect: runner raises it where the call was made
            self.channel.send((call, "defect", f"{type(exc).__name__}: {exc}"))
        finally:
            self.calls.pop(call, None)

    def closed(self, exc: Exception | None) -> None:
        if not self.ended.done():
            self.ended.set_result(None)

    async def serve(self, fd: int) -> None:
        os.set_inheritable(fd, False)          # nothing this process might start gets the socket
        await asyncio.get_running_loop().create_unix_connection(lambda: self.channel, sock=socket.socket(fileno=fd))
        await self.ended
        for task in list(self.calls.values()):
            task.cancel()
        await self.transport.aclose()


async def serve(fd: int) -> None:
    await Worker().serve(fd)


def main() -> None:
    try:
        asyncio.run(serve(int(sys.argv[1])))
    except Exception as exc:  # noqa: BLE001 - runner sees the socket close and goes on without it
        sys.stderr.write(redact(f"runner: the HTTP process stopped: {type(exc).__name__}: {exc}\n"))
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)


if __name__ == "__main__":
    main()
