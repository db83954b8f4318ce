"""`--input -`: standard input, copied once to a temporary file that every adapter reads like
any input (a run reads its input more than once: a counting pass, then the items), so memory
stays flat in its size. The run removes the copy when it ends."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO, TextIO

from runner.errors import InputError


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
    handle, name = tempfile.mkstemp(prefix="runner-stdin-")
    with os.fdopen(handle, "wb") as copy:
        shutil.copyfileobj(binary, copy)
    return Path(name)
