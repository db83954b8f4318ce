"""Backoff shared by every network call (LLM and search): 1 s, 2 s, 4 s ... with +-25%
jitter, and a server's Retry-After honoured up to a ceiling."""

from __future__ import annotations

import random

MAX_RETRY_AFTER = 30.0


class RetryAfterTooLong(Exception):
    def __init__(self, seconds: float):
        super().__init__(f"Retry-After {seconds:.0f} s exceeds {MAX_RETRY_AFTER:.0f} s")
        self.seconds = seconds


def retry_delay(attempt: int, base: float, retry_after: float | None = None) -> float:
    """Seconds to wait before retry number `attempt + 1` (attempt counts from 0)."""
    delay = base * (2 ** attempt) * random.uniform(0.75, 1.25)
    if retry_after is not None:
        if retry_after > MAX_RETRY_AFTER:
            raise RetryAfterTooLong(retry_after)
        delay = max(delay, retry_after)
    return delay
