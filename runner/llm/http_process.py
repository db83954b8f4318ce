"""The HTTP transport in a process of its own (http_worker.py), for when this process's
event loop is the bottleneck (`--http-process on`, spill.py).

Requests go to the process, answers come back, over a socket pair (frames.py): the
model's spec once, then (call, spec, messages, params) per call. A call that is cancelled
here (its deadline passed) is cancelled there, so a local server stops generating as it
does when runner leaves a stream itself. The process ends when its socket closes: at the
run's end, or when runner dies however it dies."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any

from runner.llm.children import child_environment, module_command
from runner.llm.frames import FrameChannel
from runner.llm.spec import ModelSpec
from runner.llm.transport import Completion, TransportError

EXIT_WAIT = 5.0          # seconds the process gets to end after its socket closed


class WorkerLost(Exception):
    """The HTTP process ended (or never started) before it answered this call."""


class HTTPProcess:
    def __init__(self) -> None:
        self._channel: FrameChannel | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._specs: dict[int, tuple[ModelSpec, int]] = {}
        self._calls = 0
        self.lost_reason = ""

    async def start(self) -> None:
        """Start the process; WorkerLost when it cannot be started."""
        ours, theirs = socket.socketpair()
        try:
            with theirs:
                # A session of its own: Ctrl-C and a SIGTERM to the group reach runner, which
                # ends its calls and closes the socket; the process ends with it.
                self._process = await asyncio.create_subprocess_exec(
                    *module_command("runner.llm.http_worker", str(theirs.fileno())),
                    stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                    pass_fds=(theirs.fileno(),), env=child_environment(), start_new_session=True)
            _, self._channel = await asyncio.get_running_loop().create_unix_connection(
                lambda: FrameChannel(self._answer, self._closed), sock=ours)
        except BaseException as exc:
            ours.close()
            if self._process is not None and self._process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    self._process.kill()
            if isinstance(exc, (OSError, ValueError)):
                raise WorkerLost(f"cannot start it: {exc}") from None
            raise

    def _token(self, spec: ModelSpec, channel: FrameChannel) -> int:
        known = self._specs.get(id(spec))
        if known is None or known[0] is not spec:
            known = self._specs[id(spec)] = (spec, len(self._specs))
            channel.send(("spec", known[1], spec))
        return known[1]

    async def complete(self, spec: ModelSpec, messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        channel = self._channel
        if channel is None or not channel.open:
            raise WorkerLost(self.lost_reason or "it is not running")
        token = self._token(spec, channel)
        self._calls += 1
        call = self._calls
        future = asyncio.get_running_loop().create_future()
        self._pending[call] = future
        try:
            channel.send((call, token, messages, params))
            return await future
        except asyncio.CancelledError:
            if self._pending.pop(call, None) is not None and channel.open:
                channel.send(("cancel", call))
            raise
        finally:
            self._pending.pop(call, None)

    def _answer(self, message: tuple[int, str, Any]) -> None:
        call, outcome, value = message
        future = self._pending.pop(call, None)
        if future is None or future.done():
            return
        if outcome == "ok":
            future.set_result(Completion(*value))
        elif outcome == "error":
            kind, text, status, retry_after, body = value
            future.set_exception(TransportError(kind, text, status, retry_after, body))
        else:        # a defect in the transport, as it would surface in this process
            future.set_exception(RuntimeError(f"in the HTTP process: {value}"))

    def _closed(self, exc: Exception | None) -> None:
        self.lost_reason = self.lost_reason or (f"it ended ({exc})" if exc else "it ended")
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(WorkerLost(self.lost_reason))

    async def aclose(self) -> None:
        self.lost_reason = "the run ended"
        if self._channel is not None:
            self._channel.close()
        process, self._process = self._process, None
        if process is None:
            return
        try:
            await asyncio.wait_for(process.wait(), EXIT_WAIT)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
