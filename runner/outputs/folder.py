"""The output folder of one run: locked while the run writes it, and never left holding
a finished run's summary beside another run's results."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from runner.errors import RunnerError

LOCK_FILE = ".runner.lock"
# Written last when a run ends: removed first when a run starts, so a killed rerun
# leaves its partial results.jsonl alone rather than beside the previous run's summary.
FINISHED_FILES = ("summary.json", "report.md", "report.html")


class OutputFolder:
    """Holds an exclusive lock on `<out>/.runner.lock` (it holds the owner's pid) until released."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def claim(self) -> OutputFolder:
        lock = self.path / LOCK_FILE
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise RunnerError(f"--out {self.path}: cannot write the output folder: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise RunnerError(f"--out {self.path}: another run (process {holder}) is writing this folder; "
                              "wait for it to finish or choose another --out") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        try:
            for name in FINISHED_FILES:
                (self.path / name).unlink(missing_ok=True)
        except OSError as exc:
            self.release()
            raise RunnerError(f"--out {self.path}: cannot write the output folder: {exc.strerror or exc}") from None
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)      # closing drops the lock; the file stays (unlinking it would race)
            self._fd = None
