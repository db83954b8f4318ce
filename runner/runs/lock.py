"""The output folder of one run: locked while the run writes it, and never left holding
a finished run's summary beside another run's results."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from runner.errors import RunnerError
from runner.fileio import open_own
from runner.runs.folders import ANSWERED_FILE, CALLS_FILE, VOTES_FILE

LOCK_FILE = ".runner.lock"
# Written last when a run ends: removed first when a run starts, so a killed rerun
# leaves its partial results.jsonl alone rather than beside the previous run's summary.
FINISHED_FILES = ("summary.json", "report.md", "report.html")
# Every name a run writes in its folder (exports only with --format).
RUN_FILES = (LOCK_FILE, "results.jsonl", ANSWERED_FILE, VOTES_FILE, CALLS_FILE, *FINISHED_FILES, "results.csv",
             "junit.xml")


def refuse_overwriting_sources(out_dir: Path, input_path: Path | None, parent: Path | None = None) -> None:
    """A run never writes over what it reads: its input (`--input report.md --out .`) or the run
    a `--failed-from` rerun completes itself from (`--failed-from runs/x --out runs/x`)."""
    try:
        out = out_dir.resolve()
        if parent is not None and parent.resolve() == out:
            raise RunnerError(f"--out {out_dir}: that is the --failed-from run, whose results the rerun reads "
                              "while it writes its own; choose another --out (the rerun holds every item)")
        source = input_path.resolve() if input_path is not None else None
    except (OSError, RuntimeError):
        return
    if source is not None and source.parent == out and source.name in RUN_FILES:
        raise RunnerError(f"--input {input_path}: --out {out_dir} would write over it (a run writes "
                          f"{source.name} there); choose another --out or move the input")


def held(folder: Path) -> bool:
    """Whether a live run holds the folder's lock (a dead run's is free); asked read-only, never written."""
    try:
        fd = os.open(folder / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)          # and with it the shared lock, if it was taken
    return False


class OutputFolder:
    """Holds an exclusive lock on `<out>/.runner.lock` (it holds the owner's pid) until released."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def claim(self) -> OutputFolder:
        lock = self.path / LOCK_FILE
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            for name in RUN_FILES:      # a symlink there could send a write outside the folder
                if (self.path / name).is_symlink():
                    raise RunnerError(f"--out {self.path}: {name} there is a symbolic link; a run never writes "
                                      "through one: remove it or choose another --out")
            fd = open_own(lock, os.O_RDWR | os.O_CREAT)
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
            # The run before's calls go too: this run's calls.jsonl holds only its own, even
            # when it makes none.
            for name in (*FINISHED_FILES, CALLS_FILE):
                (self.path / name).unlink(missing_ok=True)
        except OSError as exc:
            self.release()
            raise RunnerError(f"--out {self.path}: cannot write the output folder: {exc.strerror or exc}") from None
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)      # closing drops the lock; the file stays (unlinking it would race)
            self._fd = None
