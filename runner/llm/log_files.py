"""A run's call log files (see logs.py): written under provisional names in the open
llm_logs/.pending folder, then given their final names in llm_logs."""

from __future__ import annotations

import os
import re

from runner.fileio import open_own

LOG_NAME = re.compile(r".+_\d{4,}_item\d+\.txt")      # what finish() names a log; nothing else is removed
PENDING_NAME = re.compile(r"\d{8,}_\d{5,}_[^/\\\x00]+\.txt")
LOGS_UNWRITTEN = "runner: some call logs could not be written ({})\n"     # said once, at the run's end


def write_pending(folder: int, name: str, body: bytes) -> None:
    """One call's log under its provisional name, in the open .pending folder."""
    if not PENDING_NAME.fullmatch(name):
        raise ValueError(f"not a provisional log name: {name[:80]!r}")
    # Debug output: one plain write, no fsync (results and the cache carry durability);
    # os-level calls, as a cached run writes hundreds of these in a fraction of a second.
    fd = open_own(name, dir_fd=folder)
    try:
        os.write(fd, body)
    finally:
        os.close(fd)


def rename_logs(pending: int, folder: int) -> None:
    """Give the logs in the open .pending folder their final names in the open llm_logs
    folder, numbered per model in item then call order; remove the folder's older logs."""
    try:
        names = sorted(os.listdir(pending))       # names sort by (item, call)
    except OSError:
        return
    counters: dict[str, int] = {}
    moves = []
    for name in names:
        item, _, model = name.removesuffix(".txt").split("_", 2)
        counters[model] = counters.get(model, 0) + 1
        moves.append((name, f"{model}_{counters[model]:04d}_item{int(item)}.txt"))
    kept = {target for _, target in moves}
    with os.scandir(folder) as entries:
        for stale in entries:
            if stale.name not in kept and LOG_NAME.fullmatch(stale.name) and \
                    (stale.is_symlink() or stale.is_file(follow_symlinks=False)):
                os.unlink(stale.name, dir_fd=folder)         # the rest are replaced in place
    # Relative to the two open folders: the kernel walks neither path again for each log.
    for name, target in moves:
        os.replace(name, target, src_dir_fd=pending, dst_dir_fd=folder)
