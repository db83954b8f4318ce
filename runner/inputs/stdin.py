"""`--input -`: standard input, copied once to a temporary file that every adapter reads like
any input (a run reads its input more than once: a counting pass, then the items), so memory
stays flat in its size. The run removes the copy when it ends; a copy cut short by Ctrl-C or
SIGTERM is removed at once."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import BinaryIO, TextIO, TypeVar

from runner.errors import InputError, Terminated

T = TypeVar("T")
STDIN_NAME = "<stdin>"      # what the items' errors call standard input (its copy is a temporary file)


def is_stdin(path: Path | None) -> bool:
    return path is not None and str(path) == "-"


def spool(stdin: TextIO | None) -> Path:
    """A temporary file holding the bytes standard input gives until its end; a terminal is
    refused (nothing was piped in: the command would wait for typing)."""
    binary: BinaryIO | None = getattr(stdin, "buffer", None)
    if stdin is None or binary is None:
        raise InputError("--input -: there is no standard input to read")
    if stdin.isatty():
        raise InputError("--input -: standard input is a terminal; pipe the input in "
                         "(e.g. cat items.csv | runner run PIPELINE --input - --input-format csv)")

    def terminate(signum: int, frame: FrameType | None) -> None:
        raise Terminated()
    held = {signal.SIGINT, signal.SIGTERM}
    name = ""
    # SIGTERM raises Terminated (as Ctrl-C raises KeyboardInterrupt) while the copy is made, so it is removed.
    with _swapped(lambda: signal.signal(signal.SIGTERM, terminate),
                  lambda before: signal.signal(signal.SIGTERM, before)):
        try:
            # Ctrl-C and SIGTERM held back: the file and its name come together, no stop between them.
            with _swapped(lambda: signal.pthread_sigmask(signal.SIG_BLOCK, held),
                          lambda before: signal.pthread_sigmask(signal.SIG_SETMASK, before)):
                handle, name = tempfile.mkstemp(prefix="runner-stdin-")
            with os.fdopen(handle, "wb") as copy:
                shutil.copyfileobj(binary, copy)
        except BaseException:          # Ctrl-C, SIGTERM, a full disk: no copy left behind
            if name:
                Path(name).unlink(missing_ok=True)
            raise
    return Path(name)


@contextmanager
def _swapped(install: Callable[[], T], restore: Callable[[T], object]) -> Iterator[None]:
    """`install` (it returns what it replaced), then `restore` with that when the block ends; nothing
    where the platform or thread cannot install it (only the main thread sets a signal handler)."""
    try:
        before = install()
    except (AttributeError, ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        restore(before)
