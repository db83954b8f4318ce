"""What is known of a request before it is sent: its answer in the response cache (`Cache`),
or, in a sweep, that it fails (`KnownFailures`).

The cache layer finds the answer (one handed to the writer and not committed yet included) and
passes it down on the ask, to be read and logged below like a sent one; a fresh answer that
comes back read is stored. A `cache_as` answer made by another model or endpoint is counted,
and said at the end."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runner.llm.cache.key import new_entry, usable
from runner.llm.cache.store import JsonCache
from runner.llm.client.spec import ModelSpec
from runner.llm.request import Ask, Failed, Layer, Reply
from runner.llm.writer import Writer


@dataclass
class Cache:
    """The response cache as a layer (`no_cache`: nothing read, every answer still stored)."""

    inner: Layer
    cache: Callable[[], JsonCache]              # opened on first use
    answers: Writer                             # the writer of the cache's answers
    no_cache: bool
    no_cache_as: bool
    made_by: Callable[[ModelSpec], str]         # the model and endpoint a fresh answer is kept as made by
    redact: Callable[[str], str]
    borrowed: Counter[tuple[str, str, str]] = field(default_factory=Counter)    # (seat, cache_as, made by): answers

    async def __call__(self, ask: Ask) -> Reply:
        key = ask.key
        ask.cached = None if self.no_cache else usable(self.answers.pending.get(key) or await self._get(key),
                                                       ask.request.embed)
        if ask.cached is not None:
            ask.stats.cache_hits += 1
            self._note_borrowed(ask.spec, ask.cached)
        reply = await self.inner(ask)
        if not reply.cached:
            ask.stats.answered += 1
            entry = new_entry(reply.completion.text or "", reply.completion, ask.request.logprobs,
                              made_by=self.made_by(ask.spec))
            cache = self.cache()
            if hasattr(cache, "aset"):
                await self.answers.cache_set_shared(cache, reply.key, entry)
            else:
                self.answers.cache_set(cache, reply.key, entry)
        return reply

    async def _get(self, key: str) -> Any:
        """The cache's entry for `key`: asked of the cache's owner (a Ray worker on another machine's), or read here."""
        cache = self.cache()
        remote = getattr(cache, "aget", None)
        return await remote(key) if remote is not None else cache.get(key)

    def _note_borrowed(self, spec: ModelSpec, cached: dict[str, Any]) -> None:
        made_by = cached.get("made_by") if spec.cache_as and not self.no_cache_as else None
        if isinstance(made_by, str) and made_by != self.made_by(spec):
            self.borrowed[(spec.name, str(spec.cache_as), self.redact(made_by))] += 1

    def hints(self) -> list[str]:
        return [f"{n} answer(s) of {name} came from the cache_as '{as_}' cache, made by {by}; --no-cache-as "
                "keeps each endpoint's answers apart" for (name, as_, by), n in self.borrowed.items()]


@dataclass
class KnownFailures:
    """A sweep's calls known to fail (`RunOptions.failed_calls`, cache key: error), failed with it
    unsent; a call that fails is added under its first request's key, so a sweep sends each at
    most once. None: every call is made."""

    inner: Layer
    failed: dict[str, str] | None

    async def __call__(self, ask: Ask) -> Reply:
        if ask.cached is None and self.failed is not None and ask.key in self.failed:
            raise Failed(self.failed[ask.key])
        return await self.inner(ask)

    def add(self, key: str, message: str) -> None:
        if self.failed is not None:
            self.failed.setdefault(key, message)
