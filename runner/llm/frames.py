"""Messages between runner and its HTTP process (http_process.py): length-prefixed pickles
over a socket pair, written once per turn of the event loop.

Pickle, as both ends are this program and the socket pair is theirs alone: no other
process holds either end. A turn's messages go out in one write, so the other process
wakes once for all the requests (or answers) of a turn, not once for each."""

from __future__ import annotations

import asyncio
import pickle
import struct
from collections.abc import Callable
from typing import Any

HEADER = struct.Struct("!I")
MAX_FRAME = 1 << 30         # a message longer than this is a broken stream, not a message


class FrameChannel(asyncio.Protocol):
    def __init__(self, on_message: Callable[[Any], None], on_closed: Callable[[Exception | None], None]) -> None:
        self._on_message = on_message
        self._on_closed = on_closed
        self._received = bytearray()
        self._outgoing: list[bytes] = []
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        received = self._received
        received += data
        start, end = 0, len(received)
        while end - start >= HEADER.size:
            (size,) = HEADER.unpack_from(received, start)
            if size > MAX_FRAME:
                self.close()
                return
            if end - start - HEADER.size < size:
                break
            body = start + HEADER.size
            self._on_message(pickle.loads(received[body:body + size]))
            start = body + size
        if start:
            del received[:start]

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._on_closed(exc)

    @property
    def open(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    def send(self, message: Any) -> None:
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        if not self._outgoing:
            asyncio.get_running_loop().call_soon(self._flush)
        self._outgoing += (HEADER.pack(len(payload)), payload)

    def _flush(self) -> None:
        outgoing, self._outgoing = self._outgoing, []
        if self.open:
            assert self._transport is not None
            self._transport.write(b"".join(outgoing))

    def close(self) -> None:
        if self._outgoing:
            self._flush()
        if self._transport is not None:
            self._transport.close()
