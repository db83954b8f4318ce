"""Human feedback on a stored result: `runner feedback --store DIR --trace-id ID --up|--down`."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .errors import RunnerError
from .fileio import dumps
from .memo import MemoStore, find_store


def record_feedback(store: Path, trace_id: str, is_positive: bool, rationale: str | None = None) -> dict[str, Any]:
    """Append one feedback entry, linked to the stored result with that trace id."""
    path = find_store(store)
    memo = MemoStore(path)
    for content_hash, result in memo.entries.items():
        if isinstance(result, dict) and result.get("trace_id") == trace_id:
            entry = {"trace_id": trace_id, "content_hash": content_hash, "is_positive": is_positive,
                     "rationale": rationale,
                     "timestamp": datetime.now(UTC).isoformat(timespec="seconds")}
            with (path.parent / "feedback.jsonl").open("a", encoding="utf-8") as handle:
                handle.write(dumps(entry) + "\n")
            return entry
    raise RunnerError(f"unknown trace id '{trace_id}': no stored result in {path} has it "
                      f"({len(memo.entries)} stored result(s))")
