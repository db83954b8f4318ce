"""The response cache's entries: what is stored for an answer, and a stored entry as the
service reads it back."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from runner.llm.client.transport import Completion
from runner.llm.client.usage import usage_of
from runner.llm.logprobs import usable as token_pairs
from runner.safetext import clean_text


def new_entry(text: str, completion: Completion, logprobs: bool = False, made_by: str | None = None) -> dict[str, Any]:
    """What the cache keeps of an answer: its text, finish reason, usage, cost, the model that
    answered, and when (`runner cache stats` and `clear --older-than` read these); and for a
    request that asked for token probabilities, those the server sent (null: it sent none)."""
    entry: dict[str, Any] = {"content": text, "finish_reason": completion.finish_reason, "usage": completion.usage,
                             "cost": completion.cost, "model": completion.model,
                             "timestamp": datetime.now(UTC).isoformat(timespec="seconds")}
    if logprobs:
        entry["logprobs"] = completion.logprobs
    if made_by:
        entry["made_by"] = made_by       # the model and endpoint: a `cache_as` answer says where it came from
    return entry


def cached_completion(entry: dict[str, Any], model: str) -> Completion:
    """A usable entry (see `usable`) as the answer it keeps: what new_entry took from it."""
    return Completion(entry["content"], entry.get("finish_reason"), entry.get("usage", {}), 0.0,
                      entry.get("model", model), logprobs=entry.get("logprobs"))


def usable(cached: Any) -> dict[str, Any] | None:
    """A cached answer as the service reads it, or None (asked again) when the entry is not
    one: whatever a cache file holds, a rerun never fails on it."""
    if not isinstance(cached, dict) or not isinstance(cached.get("content"), str):
        return None
    finish = cached.get("finish_reason")
    model = cached.get("model")
    return {**cached, "content": clean_text(cached["content"]), "usage": usage_of(cached.get("usage")),
            "finish_reason": clean_text(finish) if isinstance(finish, str) else None,
            "logprobs": token_pairs(cached.get("logprobs")),
            **({"model": clean_text(model)} if isinstance(model, str) else {})}
