"""Backoff shared by every network call (LLM and search): 1 s, 2 s, 4 s ... with +-25%
jitter, and a server's Retry-After honoured up to a ceiling."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

MAX_RETRY_AFTER = 30.0
T = TypeVar("T")


class RetryAfterTooLong(Exception):
    def __init__(self, seconds: float):
        super().__init__(f"Retry-After {seconds:.0f} s exceeds {MAX_RETRY_AFTER:.0f} s")
        self.seconds = seconds


class Retryable(Exception):
    """A failure worth another attempt (a 429, a 5xx, a timeout, a reset)."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


def retry_delay(attempt: int, base: float, retry_after: float | None = None) -> float:
    """Seconds to wait before retry number `attempt + 1` (attempt counts from 0)."""
    delay = base * (2 ** attempt) * random.uniform(0.75, 1.25)
    if retry_after is not None:
        if retry_after > MAX_RETRY_AFTER:
            raise RetryAfterTooLong(retry_after)
        delay = max(delay, retry_after)
    return delay


async def with_retries(send: Callable[[], Awaitable[T]], retries: int, backoff: float) -> T:
    """`send()` until it returns, at most `retries` more times while it raises Retryable (anything
    else ends at once); out of retries, or told to wait too long, the last Retryable is raised."""
    for attempt in range(retries + 1):
        try:
            return await send()
        except Retryable as failure:
            if attempt == retries:
                raise
            try:
                delay = retry_delay(attempt, backoff, failure.retry_after)
            except RetryAfterTooLong as too_long:
                raise Retryable(f"{failure.message} ({too_long})") from None
        await asyncio.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


def parse_retry_after(value: str | None) -> float | None:
    """A Retry-After header (seconds or an HTTP date) as seconds from now."""
    if not value:
        return None
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    from email.utils import parsedate_to_datetime  # only for a date: the email package is big
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
