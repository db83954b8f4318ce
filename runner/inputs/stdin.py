"""`--input -`: standard input, copied once to a temporary file that every adapter reads like
any input (a run reads its input more than once: a counting pass, then the items), so memory
stays flat in its size. The run removes the copy when it ends; a copy cut short by Ctrl-C or
SIGTERM is removed at once."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from contextlib import ExitStack, suppress
from pathlib import Path
from types import FrameType
from typing import BinaryIO, TextIO

from runner.errors import InputError, Terminated

CANNOT_SET = (AttributeError, ValueError, OSError)
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
    name = ""
    # Each signal setting is undone when its block ends; none is made where the platform or thread
    # cannot make it (only the main thread sets a signal handler; Windows has no signal mask).
    with ExitStack() as handler:
        # SIGTERM raises Terminated (as Ctrl-C raises KeyboardInterrupt) while the copy is made, so it is removed.
        with suppress(*CANNOT_SET):
            handler.callback(signal.signal, signal.SIGTERM, signal.signal(signal.SIGTERM, terminate))
        try:
            # Ctrl-C and SIGTERM held back: the file and its name come together, no stop between them.
            with ExitStack() as mask:
                with suppress(*CANNOT_SET):
                    mask.callback(signal.pthread_sigmask, signal.SIG_SETMASK,
                                  signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM}))
                handle, name = tempfile.mkstemp(prefix="runner-stdin-")
            with os.fdopen(handle, "wb") as copy:
                shutil.copyfileobj(binary, copy)
        except BaseException:          # Ctrl-C, SIGTERM, a full disk: no copy left behind
            if name:
                Path(name).unlink(missing_ok=True)
            raise
    return Path(name)
