"""`--input -`: standard input, copied once to a temporary file that every adapter reads like
any input (a run reads its input more than once: a counting pass, then the items), so memory
stays flat in its size. The run removes the copy when it ends; a copy cut short by Ctrl-C or
SIGTERM is removed at once."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import BinaryIO, TextIO

from runner.errors import InputError, Terminated


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
    name = ""
    with _sigterm_raises():
        try:
            with _signals_held():        # the file and its name come together: no stop between them
                handle, name = tempfile.mkstemp(prefix="runner-stdin-")
            with os.fdopen(handle, "wb") as copy:
                shutil.copyfileobj(binary, copy)
        except BaseException:          # Ctrl-C, SIGTERM, a full disk: no copy left behind
            if name:
                Path(name).unlink(missing_ok=True)
            raise
    return Path(name)


@contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM held back (delivered when it ends) where the platform can."""
    held = {signal.SIGINT, signal.SIGTERM}
    try:
        before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    except (AttributeError, ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGTERM raises Terminated (as Ctrl-C raises KeyboardInterrupt) while the copy is made,
    so the copy is removed; the handler before is put back after. Only the main thread can
    set one: elsewhere, nothing changes."""
    def terminate(signum: int, frame: FrameType | None) -> None:
        raise Terminated()
    try:
        before = signal.signal(signal.SIGTERM, terminate)
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
