"""Per-call logs: <out>/llm_logs/<model name>_<NNNN>_item<K>.txt, numbered per model in
item order then call order (stable across reruns, whatever order calls finished in); the
name says which item K the call belongs to, so the report links each vote to its log.

Each call is written as soon as it is logged, under a provisional name in
llm_logs/.pending/, so a killed run keeps its logs; the run's end gives them their
final numbers. Files are written in place, on the event loop: one small file costs tens of
microseconds, while handing each one to a writer thread and awaiting it cost a fully cached
run of 600 calls half a second in thread switches (bench/openai_compat.py).

The log of an answer the cache keeps is kept beside the cache too (<cache>/call_logs/<key>.txt,
a hard link: no copy), and a later run that reuses the answer links that log in rather than
writing a new file. A cached call's log is thus the exchange that produced its answer; the
report and the results say the call was cached. A new file costs the file system an inode
(measured here from 20 us to 0.5 ms each, by how busy the disk's area is), a link does not."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

PENDING = ".pending"
LOG_STORE = "call_logs"          # in the cache folder: the log of each cached answer


def format_messages(messages: list[dict[str, Any]]) -> str:
    if len(messages) == 1 and messages[0].get("role") == "user":
        return str(messages[0].get("content", ""))
    return "\n\n".join(f"[{m.get('role')}]\n{m.get('content', '')}" for m in messages)


class CallLogWriter:
    def __init__(self, directory: Path, store: Path | None = None):
        self.directory = directory
        self.pending = directory / PENDING
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
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            os.write(fd, body.encode("utf-8"))
        finally:
            os.close(fd)
        return path

    def reuse(self, item: int, seq: int, model: str, key: str) -> bool:
        """Log a cache hit as the kept log of the call that produced its answer, if there is one."""
        if self._store is None:
            return False
        try:
            os.link(os.path.join(self._store, f"{key}.txt"), self._path(item, seq, model))
            return True
        except FileNotFoundError:
            return False
        except OSError:                 # another file system, or links not allowed: write instead
            self._store = None
            return False

    def keep(self, path: str, key: str) -> None:
        """Keep the log at `path` as the log of the cached answer `key`."""
        if self._store is None:
            return
        kept = os.path.join(self._store, f"{key}.txt")
        try:
            try:
                os.link(path, kept)
            except FileExistsError:     # the answer was asked again (--no-cache): the new log
                os.unlink(kept)
                os.link(path, kept)
        except FileNotFoundError:
            pass
        except OSError:
            self._store = None

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
        for stale in self.directory.glob("*_[0-9][0-9][0-9][0-9]*.txt"):
            if stale.name not in kept:                          # the rest are replaced in place
                stale.unlink()
        folder = str(self.directory)
        for name, target in moves:
            os.replace(os.path.join(self._pending, name), os.path.join(folder, target))
        shutil.rmtree(self.pending, ignore_errors=True)
