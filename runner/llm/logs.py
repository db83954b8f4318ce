"""Per-call logs: <out>/llm_logs/<model name>_<NNNN>_item<K>.txt, numbered per model in
item order then call order (stable across reruns, whatever order calls finished in); the
name says which item K the call belongs to, so the report links each vote to its log.

Each call is written as soon as it is logged, under a provisional name in
llm_logs/.pending/, so a killed run keeps its logs; the run's end gives them their
final numbers. Files are written in place, on the event loop: one small file costs tens of
microseconds, while handing each one to a writer thread and awaiting it cost a fully cached
run of 600 calls half a second in thread switches (bench/openai_compat.py).

The log of an answer the cache keeps is kept beside the cache too (<cache>/call_logs/<key>.txt),
and a later run that reuses the answer copies that log in rather than formatting it again.
A cached call's log is thus the exchange that produced its answer; the report and the
results say the call was cached. Each run's log and the cache's are separate files (issue
31: no hard links): editing one never rewrites another run's or the cache's, and every file
gets the mode the writing run's umask gives. The copy is copy_file_range (a clone where the
file system shares extents). Its price is the inode a new file costs, which a link did not
(bench/call_logs.py): on this busy 2-core machine 600 copies took 30-120 ms against 9-26 ms
of links, and a fully cached 600-call run 0.56-1.35 s against 0.27-0.46 s linked.

Only files named as runner names logs are ever removed, and no write follows a symlink."""

from __future__ import annotations

import itertools
import os
import re
import shutil
from pathlib import Path
from typing import Any

from runner.fileio import NO_FOLLOW, open_own
from runner.safetext import utf8

PENDING = ".pending"
LOG_STORE = "call_logs"          # in the cache folder: the log of each cached answer
LOG_NAME = re.compile(r".+_\d{4,}_item\d+\.txt")      # what finish() names a log; nothing else is removed
_TEMP_NAMES = itertools.count()


def copy_file(source: str, target: str) -> None:
    """A new file at `target` (umask mode, no symlink followed) with `source`'s bytes."""
    src = os.open(source, os.O_RDONLY | NO_FOLLOW)
    try:
        dst = open_own(target)
        try:
            size = os.fstat(src).st_size
            copied = 0
            try:
                while copied < size:
                    step = os.copy_file_range(src, dst, size - copied)
                    if step == 0:
                        break
                    copied += step
            except OSError:          # an old kernel or another file system: read and write
                os.lseek(src, copied, os.SEEK_SET)
                while chunk := os.read(src, 1 << 20):
                    os.write(dst, chunk)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def format_messages(messages: list[dict[str, Any]]) -> str:
    if len(messages) == 1 and messages[0].get("role") == "user":
        return str(messages[0].get("content", ""))
    return "\n\n".join(f"[{m.get('role')}]\n{m.get('content', '')}" for m in messages)


class CallLogWriter:
    def __init__(self, directory: Path, store: Path | None = None):
        self.directory = directory
        self.pending = directory / PENDING
        if self.pending.is_symlink():                       # planted: removing a link leaves its target alone
            self.pending.unlink()
        shutil.rmtree(self.pending, ignore_errors=True)     # leftovers of a killed run
        self.pending.mkdir(parents=True, exist_ok=True)
        self._pending = str(self.pending)
        self._store = str(store) if store is not None else None
        if store is not None:
            try:
                store.mkdir(parents=True, exist_ok=True)
            except OSError:
                self._store = None

    def _path(self, item: int, seq: int, model: str) -> str:
        return os.path.join(self._pending, f"{item:08d}_{seq:05d}_{model}.txt")

    def add(self, item: int, seq: int, model: str, prompt: str, response: str) -> str:
        """Write one call's log; returns where it is until the run's end."""
        path = self._path(item, seq, model)
        body = f"=== PROMPT ===\n{prompt}\n\n=== RESPONSE ===\n{response}\n"
        # Debug output: one plain write, no fsync (results and the cache carry durability);
        # os-level calls, as a cached run writes hundreds of these in a fraction of a second.
        fd = open_own(path)
        try:
            os.write(fd, utf8(body))
        finally:
            os.close(fd)
        return path

    def reuse(self, item: int, seq: int, model: str, key: str) -> bool:
        """Log a cache hit as a copy of the kept log of the call that produced its answer, if there is one."""
        if self._store is None:
            return False
        try:
            copy_file(os.path.join(self._store, f"{key}.txt"), self._path(item, seq, model))
            return True
        except FileNotFoundError:
            return False
        except OSError:                 # unreadable, or a link planted in the store: write instead
            return False

    def keep(self, path: str, key: str) -> None:
        """Keep the log at `path` as the log of the cached answer `key`."""
        if self._store is None:
            return
        kept = os.path.join(self._store, f"{key}.txt")
        # A copy renamed into place: a concurrent reader never sees half, and an answer asked
        # again (--no-cache) replaces the old log.
        temp = os.path.join(self._store, f".{key}.{os.getpid()}.{next(_TEMP_NAMES)}.tmp")
        try:
            copy_file(path, temp)
            os.replace(temp, kept)
        except FileNotFoundError:
            pass
        except OSError:
            self._store = None
        finally:
            try:
                os.unlink(temp)
            except OSError:             # renamed into place, or never made
                pass

    def finish(self) -> None:
        """Replace the folder's logs with this run's (a rerun's numbering starts again at 0001)."""
        try:
            names = sorted(os.listdir(self._pending))           # names sort by (item, call)
        except OSError:
            return
        counters: dict[str, int] = {}
        moves = []
        for name in names:
            item, _, model = name.removesuffix(".txt").split("_", 2)
            counters[model] = counters.get(model, 0) + 1
            moves.append((name, f"{model}_{counters[model]:04d}_item{int(item)}.txt"))
        kept = {target for _, target in moves}
        for stale in os.scandir(self.directory):
            if stale.name not in kept and LOG_NAME.fullmatch(stale.name) and \
                    (stale.is_symlink() or stale.is_file(follow_symlinks=False)):
                os.unlink(stale.path)                           # the rest are replaced in place
        folder = str(self.directory)
        for name, target in moves:
            os.replace(os.path.join(self._pending, name), os.path.join(folder, target))
        shutil.rmtree(self.pending, ignore_errors=True)
