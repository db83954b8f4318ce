"""What a batch collector keeps: the calls it answers, the calls a model gathers before
they go out, the batches it tracks, and each model's figures for summary.json."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runner.llm.batch.lines import RequestLine
from runner.llm.client.spec import ModelSpec


class Requeue:
    """A call's stored batch was never created: gather it again."""


@dataclass
class BatchCall:
    spec: ModelSpec
    item: int
    messages: list[dict[str, Any]]
    sampling: dict[str, Any]
    schema: dict[str, Any] | None
    key: Callable[[str], str]          # the call's cache key for a structured-output mode


@dataclass
class Gathered:
    """A model's calls waiting to be submitted."""

    lines: dict[str, RequestLine] = field(default_factory=dict)
    waiters: dict[str, list[asyncio.Future[Any]]] = field(default_factory=dict)
    since: float = 0.0


@dataclass
class Tracked:
    """A submitted (or, after a restart, adopted) batch and the calls waiting on it."""

    submission: str
    spec: ModelSpec
    waiters: dict[str, list[asyncio.Future[Any]]]
    batch_id: str | None = None
    status: str = "submitting"
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class ModelBatches:
    batches: int = 0
    requests: int = 0
    resumed: int = 0
    live_retries: int = 0
    problems: list[str] = field(default_factory=list)
