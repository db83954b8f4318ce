"""Sending one request: breaker and TCP probe, concurrency and rate gates, daily budget,
a total deadline per attempt, retries with backoff, and the structured-output fallback."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from runner.llm.client.limits import OVERLOAD_STATUS, AdaptiveLimit, BudgetSpent, DailyBudget, ModelGate
from runner.llm.client.spec import ModelSpec
from runner.llm.client.structured import FormatChoices, response_format
from runner.llm.client.transport import Completion, Transport, TransportError
from runner.redact import redact
from runner.retry import RetryAfterTooLong, retry_delay

MAX_TIMEOUTS = 2        # a timed-out attempt is retried once: a third wait rarely ends differently


@dataclass
class ModelStats:
    calls: int = 0              # requests sent, retries included
    cache_hits: int = 0
    failures: int = 0           # calls that got no usable answer
    answered: int = 0           # calls sent that got a usable answer
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    usage_unknown: int = 0      # answers whose server reported no token counts (e.g. streamed by llama.cpp)
    cost: float = 0.0

    def add_usage(self, completion: Completion) -> None:
        """Count an answer's tokens and cost."""
        if not completion.usage:      # the token figures then undercount: say so rather than add 0
            self.usage_unknown += 1
        self.prompt_tokens += completion.usage.get("prompt_tokens", 0)
        self.completion_tokens += completion.usage.get("completion_tokens", 0)
        self.total_tokens += completion.usage.get("total_tokens", 0)
        self.cost += completion.cost or 0.0


def timeout_message(spec: ModelSpec, max_tokens: Any) -> str:
    return (f"request timed out: no complete answer within models.{spec.name}.timeout = {spec.timeout:g} s. "
            f"A slow or busy server: raise models.{spec.name}.timeout, send fewer requests at once "
            f"(--concurrency, models.{spec.name}.limits.concurrency), or ask for shorter answers "
            f"(max_tokens, now {max_tokens})")


class Sender:
    def __init__(self, transport: Transport, cache_dir: Path, concurrency: int, concurrency_given: bool = False):
        self.transport = transport
        self.cache_dir = cache_dir
        self.formats = FormatChoices(cache_dir)
        self.concurrency = max(1, concurrency)
        self.concurrency_given = concurrency_given      # --concurrency was on the command line
        self.breakers: dict[str, str] = {}
        self._probes: dict[str, asyncio.Future[bool]] = {}
        self._gates: dict[str, ModelGate] = {}
        self._local: dict[str, AdaptiveLimit | None] = {}
        self._global = asyncio.Semaphore(self.concurrency)
        self._budget: DailyBudget | None = None
        # Set on a Ray worker: gates and daily budgets held for the whole cluster (ray_blocks.py).
        self.cluster_limits: Any = None

    async def send(self, spec: ModelSpec, messages: list[dict[str, Any]], sampling: dict[str, Any],
                   schema: dict[str, Any] | None, mode: str, stats: ModelStats,
                   embed: bool = False, on_sent: Callable[[], None] = lambda: None) -> tuple[Completion, str]:
        """The completion, and the structured-output mode it was requested with (a server that rejects
        a format is asked anew with the next). `embed`: the embeddings of the messages' contents;
        `on_sent` is told when a request goes out (counted as sent)."""
        if spec.api_base:
            await self._probe(spec)
        if spec.endpoint in self.breakers:
            raise TransportError("breaker", self.breakers[spec.endpoint])
        gate = self._gate(spec)
        adaptive = gate.semaphore if isinstance(gate.semaphore, AdaptiveLimit) else None
        limit = spec.limits.get("requests_per_day")
        attempt = timeouts = 0
        while True:
            # The model's own gate first: calls queued for a one-slot server must not hold
            # run-wide slots that other models could use.
            async with gate, self._global:
                await gate.pace()
                if spec.endpoint in self.breakers:
                    raise TransportError("breaker", self.breakers[spec.endpoint])
                if limit is not None:
                    try:
                        self._daily().spend(f"{spec.name}|{spec.model}", limit, spec.name)
                    except BudgetSpent as exc:
                        raise TransportError("budget", str(exc)) from None
                # Calls that queued while another learned the endpoint's format use it too.
                mode = self.formats.settled(spec, mode, schema)
                params = dict(sampling)
                wanted = response_format(mode, schema)
                if wanted is not None:
                    params["response_format"] = wanted
                stats.calls += 1
                on_sent()
                request = self.transport.embed(spec, [str(m.get("content", "")) for m in messages], params) \
                    if embed else self.transport.complete(spec, messages, params)
                try:
                    # One request under the total deadline; a local server's adaptive limit learns its time.
                    with adaptive.sending() if adaptive is not None else contextlib.nullcontext():
                        async with asyncio.timeout(spec.timeout):
                            completion = await request
                    stats.add_usage(completion)
                    completion.attempts = attempt + 1
                    return completion, mode
                except TimeoutError:
                    error = TransportError("timeout", "")
                except TransportError as exc:
                    error = exc
            error.attempts = attempt + 1
            if adaptive is not None:
                _overload(adaptive, error)
            if (following := self.formats.fall_back(spec, mode, error, schema)) is not None:
                mode, attempt, timeouts = following, 0, 0
                continue
            if error.kind == "timeout":
                timeouts += 1
                error = TransportError("timeout", timeout_message(spec, params.get("max_tokens")), attempts=attempt + 1)
            if error.opens_breaker:
                self.breakers[spec.endpoint] = error.message
                raise error
            if not error.retryable or attempt == spec.retries or timeouts >= MAX_TIMEOUTS:
                raise error
            delay = retry_pause(spec, attempt, error)
            stats.retries += 1
            attempt += 1
            await asyncio.sleep(delay)

    async def _probe(self, spec: ModelSpec) -> None:
        """One TCP connect per endpoint before its first request: a refused endpoint opens
        the breaker before the rest of the run piles onto it."""
        probe = self._probes.get(spec.endpoint)
        if probe is None:
            probe = self._probes[spec.endpoint] = asyncio.ensure_future(tcp_refused(spec.api_base or ""))
        if await asyncio.shield(probe):
            self.breakers.setdefault(spec.endpoint, "connection refused")

    def _gate(self, spec: ModelSpec) -> ModelGate:
        gate = self._gates.get(spec.name)
        if gate is None:
            gate = self.cluster_limits.gate(spec) if self.cluster_limits is not None else None
            if gate is None:
                concurrency = spec.limits.get("concurrency")
                local = self._local_limit(spec) if spec.local and not concurrency else None
                semaphore = asyncio.Semaphore(concurrency) if concurrency else local
                gate = ModelGate(semaphore, spec.limits.get("requests_per_minute"))
            self._gates[spec.name] = gate
        return gate

    def _local_limit(self, spec: ModelSpec) -> AdaptiveLimit | None:
        """A server on this machine: as many requests as --concurrency says when given, else
        as many as it serves at once (limits.py: AdaptiveLimit), shared by the models on it."""
        if spec.endpoint not in self._local:
            if self.concurrency_given:
                self._local[spec.endpoint] = None
                sys.stderr.write(redact(f"runner: {spec.endpoint} is on this machine: sending it up to "
                                        f"{self.concurrency} request(s) at a time (--concurrency {self.concurrency}; "
                                        f"models.{spec.name}.limits.concurrency overrides)\n"))
            else:
                limiter = self._local[spec.endpoint] = AdaptiveLimit(spec.endpoint, spec.name, self.concurrency)
                limiter.start_probe(spec.api_base or "")
        return self._local[spec.endpoint]

    def _daily(self) -> DailyBudget:
        if self._budget is None:
            shared = self.cluster_limits
            self._budget = shared.budget() if shared is not None else DailyBudget(self.cache_dir)
        return self._budget

    async def aclose(self) -> None:
        for limiter in self._local.values():
            if limiter is not None:
                limiter.finish()
        await self.transport.aclose()
        if self._budget is not None:
            self._budget.close()


def retry_pause(spec: ModelSpec, attempt: int, error: TransportError) -> float:
    """The pause before retrying after `error`, the attempt-th; raises it when the server asks
    for a longer wait than runner keeps."""
    try:
        return retry_delay(attempt, spec.backoff, error.retry_after)
    except RetryAfterTooLong as too_long:
        raise TransportError(error.kind, f"{error.message} ({too_long})", error.status, attempts=attempt + 1) from None


def _overload(adaptive: AdaptiveLimit, error: TransportError) -> None:
    """Tell a local server's limit about an error that says it was sent too much."""
    if error.kind == "timeout":
        adaptive.overloaded("an answer timed out")
    elif error.kind == "incomplete":
        adaptive.overloaded("an answer was cut short while it was sent more at once")
    elif error.status in OVERLOAD_STATUS:
        adaptive.overloaded(f"it answered HTTP {error.status}")


async def tcp_refused(url: str, timeout: float = 3.0) -> bool:
    """True only when the host actively refuses a connection to the URL's port."""
    parts = urlsplit(url)
    if not parts.hostname:
        return False
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(parts.hostname, port), timeout)
    except ConnectionRefusedError:
        return True
    except (TimeoutError, OSError):
        return False
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()
    return False
