"""`--input -`: standard input, copied once to a temporary file that every adapter reads like
any input (a run reads its input more than once: a counting pass, then the items), so memory
stays flat in its size. The run removes the copy when it ends."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO

STDIN = Path("-")


def is_stdin(path: Path | None) -> bool:
    return path is not None and str(path) == "-"


def spool(stream: BinaryIO) -> Path:
    """A temporary file holding everything `stream` gives until its end."""
    handle, name = tempfile.mkstemp(prefix="runner-stdin-")
    with os.fdopen(handle, "wb") as copy:
        shutil.copyfileobj(stream, copy)
    return Path(name)
