"""The log process (log_process.py): `python -m runner.llm.log_worker SOCKET PENDING FOLDER`,
each an open descriptor: its end of the socket pair, llm_logs/.pending and llm_logs.

It writes each log it is sent under its provisional name. At the frame that ends the
stream it gives every log its final name, then closes its socket: runner waits for that.
At an end of stream without that frame (runner died) the logs keep their provisional
names, as runner's own would."""

from __future__ import annotations

import os
import socket
import struct
import sys

from runner.llm.log_files import LOGS_UNWRITTEN, rename_logs, write_pending

FRAME = struct.Struct("!II")     # the name's length and the body's; then the name and the body
END = FRAME.pack(0, 0)           # no name: every log was sent, name them all
READ_BUFFER = 1 << 20


def serve(channel: socket.socket, pending: int, folder: int) -> tuple[bool, str]:
    """Whether every log was named, and the first failure to write one ('' when none)."""
    failure = ""
    with channel.makefile("rb", buffering=READ_BUFFER) as stream:
        while len(header := stream.read(FRAME.size)) == FRAME.size:
            name_size, body_size = FRAME.unpack(header)
            if not name_size:
                rename_logs(pending, folder)
                return True, failure
            name, body = stream.read(name_size), stream.read(body_size)
            if len(body) < body_size:
                break
            try:
                write_pending(pending, name.decode("utf-8"), body)
            except (OSError, ValueError) as exc:      # debug output: the others are written
                failure = failure or f"{type(exc).__name__}: {exc}"
    return False, failure


def main() -> None:
    channel_fd, pending, folder = (int(arg) for arg in sys.argv[1:4])
    channel = socket.socket(fileno=channel_fd)
    try:
        named, failure = serve(channel, pending, folder)
    except OSError as exc:
        named, failure = False, f"{type(exc).__name__}: {exc}"
    if failure:
        sys.stderr.write(LOGS_UNWRITTEN.format(failure))
        sys.stderr.flush()
    channel.close()           # runner waits for this: every log is written and named
    os._exit(0 if named else 1)


if __name__ == "__main__":
    main()
