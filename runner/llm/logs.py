"""Per-call logs: <out>/llm_logs/<model name>_<NNNN>.txt, numbered in item order then
call order (stable across reruns, whatever order calls finished in).

Each call is written as soon as it is logged, under a provisional name in
llm_logs/.pending/, so a killed run keeps its logs; the run's end gives them their
final numbers. Files are written by one background thread: creating hundreds of small
files waits on the disk, and the run's other work goes on meanwhile."""

from __future__ import annotations

import shutil
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

PENDING = ".pending"


def format_messages(messages: list[dict[str, Any]]) -> str:
    if len(messages) == 1 and messages[0].get("role") == "user":
        return str(messages[0].get("content", ""))
    return "\n\n".join(f"[{m.get('role')}]\n{m.get('content', '')}" for m in messages)


class CallLogWriter:
    def __init__(self, directory: Path):
        self.directory = directory
        self.pending = directory / PENDING
        shutil.rmtree(self.pending, ignore_errors=True)     # leftovers of a killed run
        self.pending.mkdir(parents=True, exist_ok=True)
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llm-logs")

    def add(self, item: int, seq: int, model: str, prompt: str, response: str, cached: bool) -> Future[int]:
        body = f"=== PROMPT ===\n{prompt}\n\n=== RESPONSE ===\n{response}\n" + ("\n(cached)\n" if cached else "")
        # Debug output: one plain write, no fsync (results and the cache carry durability).
        return self._writer.submit((self.pending / f"{item:08d}_{seq:05d}_{model}.txt").write_text, body, "utf-8")

    def finish(self) -> None:
        """Replace the folder's logs with this run's (a rerun's numbering starts again at 0001)."""
        self._writer.shutdown(wait=True)
        if not self.pending.is_dir():
            return
        counters: dict[str, int] = {}
        moves = []
        for file in sorted(self.pending.iterdir()):            # names sort by (item, call)
            model = file.stem.split("_", 2)[2]
            counters[model] = counters.get(model, 0) + 1
            moves.append((file, self.directory / f"{model}_{counters[model]:04d}.txt"))
        kept = {target for _, target in moves}
        for stale in self.directory.glob("*_[0-9][0-9][0-9][0-9].txt"):
            if stale not in kept:                              # the rest are replaced in place
                stale.unlink()
        for file, target in moves:
            file.replace(target)
        shutil.rmtree(self.pending, ignore_errors=True)
