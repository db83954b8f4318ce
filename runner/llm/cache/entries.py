"""The response cache's entries: what is stored for an answer, and a stored entry as the
service reads it back."""

from __future__ import annotations

from typing import Any

from runner.fileio import now
from runner.llm.client.transport import Completion, usage_of
from runner.llm.logprobs import usable as token_pairs
from runner.safetext import clean_text


def new_entry(text: str, completion: Completion, logprobs: bool = False, made_by: str | None = None) -> dict[str, Any]:
    """What the cache keeps of an answer: its text, finish reason, usage, cost, the model that
    answered, and when (`runner cache stats` and `clear --older-than` read these); and for a
    request that asked for token probabilities, those the server sent (null: it sent none); for an
    embeddings request, the vectors."""
    entry: dict[str, Any] = {"content": text, "finish_reason": completion.finish_reason, "usage": completion.usage,
                             "cost": completion.cost, "model": completion.model,
                             "timestamp": now()}
    if logprobs:
        entry["logprobs"] = completion.logprobs
    if completion.vectors is not None:
        entry["vectors"] = completion.vectors
    if made_by:
        entry["made_by"] = made_by       # the model and endpoint: a `cache_as` answer says where it came from
    return entry


def cached_completion(entry: dict[str, Any], model: str) -> Completion:
    """A usable entry (see `usable`) as the answer it keeps: what new_entry took from it."""
    return Completion(entry["content"], entry.get("finish_reason"), entry.get("usage", {}), 0.0,
                      entry.get("model", model), logprobs=entry.get("logprobs"), vectors=entry.get("vectors"))


def usable(cached: Any, embeddings: bool = False) -> dict[str, Any] | None:
    """A cached answer as the service reads it, or None (asked again) when the entry is not
    one (for `embeddings`, one without vectors): whatever a cache file holds, a rerun never fails on it."""
    if not isinstance(cached, dict) or not isinstance(cached.get("content"), str):
        return None
    if embeddings and _vectors(cached.get("vectors")) is None:
        return None
    finish = cached.get("finish_reason")
    model = cached.get("model")
    return {**cached, "content": clean_text(cached["content"]), "usage": usage_of(cached.get("usage")),
            "finish_reason": clean_text(finish) if isinstance(finish, str) else None,
            "logprobs": token_pairs(cached.get("logprobs")), "vectors": _vectors(cached.get("vectors")),
            **({"model": clean_text(model)} if isinstance(model, str) else {})}


def _vectors(value: Any) -> list[list[float]] | None:
    """Stored embeddings as lists of numbers, or None ."""
    if not isinstance(value, list) or not all(isinstance(v, list) and v for v in value):
        return None
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for v in value for x in v):
        return None
    return [[float(x) for x in v] for v in value]
