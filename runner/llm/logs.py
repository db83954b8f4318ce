"""Per-call logs: <out>/llm_logs/<model name>_<NNNN>.txt, numbered in item order then
call order (stable across reruns, whatever order calls finished in)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..outputs.files import atomic_write


@dataclass
class CallLog:
    item: int
    seq: int
    model: str
    prompt: str
    response: str
    cached: bool


def format_messages(messages: list[dict[str, Any]]) -> str:
    if len(messages) == 1 and messages[0].get("role") == "user":
        return str(messages[0].get("content", ""))
    return "\n\n".join(f"[{m.get('role')}]\n{m.get('content', '')}" for m in messages)


def write_logs(directory: Path, logs: list[CallLog]) -> None:
    """Replace the folder's logs with these (a rerun's numbering starts again at 0001)."""
    if directory.is_dir():
        for stale in directory.glob("*_[0-9][0-9][0-9][0-9].txt"):
            stale.unlink()
    counters: dict[str, int] = {}
    for log in sorted(logs, key=lambda entry: (entry.item, entry.seq)):
        counters[log.model] = counters.get(log.model, 0) + 1
        body = (f"=== PROMPT ===\n{log.prompt}\n\n=== RESPONSE ===\n{log.response}\n"
                + ("\n(cached)\n" if log.cached else ""))
        atomic_write(directory / f"{log.model}_{counters[log.model]:04d}.txt", body)
