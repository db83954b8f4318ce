"""Call logs written by a process of their own (log_worker.py).

A run writes its first SPOOL_AFTER call logs itself (logs.py); then each log goes to the
log process, which creates its file, and at the run's end names them all while the run
writes its summary. At hundreds of calls a second this process's one core bounds the run,
and creating and renaming a file cost it about 35 us a log there (a third of that in a
tight loop). A cold citation judge at 256 calls in flight (5,214 calls): 3.13-3.31 s of
CPU here with the log process (which used 0.15 s), against 3.31-3.45 s without. A thread
would not do: every call it makes hands the interpreter lock back and forth with the loop
(writer.py).

Logs go over a socket pair as frames (log_worker.FRAME), sent once SEND_AT bytes wait or
SEND_EVERY after the first one waiting: sent at the end of each turn of the loop, the
process woke for every few logs, on this process's core, and the run's time gained a
third of what it gains now (10 paired runs each). The socket's transport keeps what the
process has not read yet, so a slow file system never stops the loop. A process that
cannot be started, or ends early, leaves the logs to this process again; one that ends
without naming them leaves that to it too."""

from __future__ import annotations

import asyncio
import socket
import subprocess

from runner.llm.children import child_environment, module_command
from runner.llm.log_worker import END, FRAME

SEND_EVERY = 0.05        # seconds a log may wait to be sent
SEND_AT = 256 << 10      # bytes waiting that are sent at once


class LogProcessUnavailable(Exception):
    """The log process cannot be started here."""


class LogProcess(asyncio.Protocol):
    def __init__(self, pending: int, folder: int) -> None:
        """Start the process for the open folders .pending and llm_logs (on the event loop's thread)."""
        try:
            loop = asyncio.get_running_loop()
            ours, theirs = socket.socketpair()
        except (RuntimeError, OSError) as exc:
            raise LogProcessUnavailable(str(exc)) from None
        try:
            with theirs:
                # A session of its own: Ctrl-C reaches runner alone, which then ends the stream.
                self._process = subprocess.Popen(
                    module_command("runner.llm.log_worker", str(theirs.fileno()), str(pending), str(folder)),
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, pass_fds=(theirs.fileno(), pending, folder),
                    env=child_environment(), start_new_session=True)
        except (OSError, ValueError) as exc:
            ours.close()
            raise LogProcessUnavailable(str(exc)) from None
        self._outgoing: list[bytes] = []
        self._size = 0
        self._transport: asyncio.Transport | None = None
        self._ended: asyncio.Future[None] = loop.create_future()
        self._socket = ours
        self._connecting = loop.create_task(loop.create_unix_connection(lambda: self, sock=ours))
        self._connecting.add_done_callback(self._connected)

    def _connected(self, connecting: asyncio.Task[object]) -> None:
        if connecting.cancelled() or connecting.exception() is not None:
            self._socket.close()          # the process sees the stream end, and ends
            self.connection_lost(None)

    def send(self, name: str, body: bytes) -> bool:
        """Hand one log over; False when the process has ended (the caller writes it)."""
        if self._ended.done():
            return False
        encoded = name.encode("utf-8")
        self._send_frame(FRAME.pack(len(encoded), len(body)), encoded, body)
        return True

    def _send_frame(self, *parts: bytes) -> None:
        if not self._outgoing:
            asyncio.get_running_loop().call_later(SEND_EVERY, self._flush)
        self._outgoing += parts
        self._size += sum(map(len, parts))
        if self._size >= SEND_AT:
            self._flush()

    def _flush(self) -> None:
        if self._transport is None or not self._outgoing:       # not connected yet: connection_made sends them
            return
        outgoing, self._outgoing, self._size = self._outgoing, [], 0
        self._transport.write(b"".join(outgoing))

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        if self._outgoing:
            self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._outgoing, self._size = [], 0
        if not self._ended.done():
            self._ended.set_result(None)

    def end(self) -> None:
        """Every log was sent: the process may name them all (it starts as soon as it reads this)."""
        if not self._ended.done():
            self._send_frame(END)
            self._flush()

    async def ended(self) -> int:
        """Wait for the process; its exit code, 0 when it wrote and named every log."""
        await asyncio.shield(self._ended)            # the process closes its end once every log is named
        return self._process.wait()
