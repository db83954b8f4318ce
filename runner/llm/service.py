"""One run's LLM service: cache, render mode, breaker, limits, retries, parsing, logs, stats."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..errors import NeedsModel, RunnerError, StepError
from ..json_cache import JsonCache
from ..observe import LLMCall
from ..retry import RetryAfterTooLong, retry_delay
from .cache import request_key
from .limits import BudgetSpent, DailyBudget, ModelGate
from .logs import CallLogWriter, format_messages
from .parsing import ParseFailure, parse_answer
from .spec import ModelSpec, build_spec
from .transport import Completion, LiteLLMTransport, Transport, TransportError

if TYPE_CHECKING:
    from ..context import Runtime

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)


@dataclass
class CallRequest:
    model: str                         # a name under models:
    messages: list[dict[str, Any]]
    item: int
    output_schema: dict[str, Any] | None = None
    as_json: bool = False
    repair: int = 0
    sampling: dict[str, Any] = field(default_factory=dict)
    sample: int = 0


@dataclass
class ModelStats:
    calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost: float = 0.0


class LLMService:
    def __init__(self, runtime: Runtime, transport: Transport | None = None):
        self.runtime = runtime
        self.options = runtime.options
        self.transport: Transport = transport or LiteLLMTransport()
        self._specs: dict[str, ModelSpec] = {}
        self._cache: JsonCache | None = None
        self._budget: DailyBudget | None = None
        self._gates: dict[str, ModelGate] = {}
        self._global: asyncio.Semaphore | None = None
        self.breakers: dict[str, str] = {}
        self._probes: dict[str, asyncio.Future[bool]] = {}
        self._logs: CallLogWriter | None = None
        self._seq: dict[int, int] = {}
        self.stats: dict[str, ModelStats] = {}

    # -- models --------------------------------------------------------------------
    def spec(self, name: str) -> ModelSpec:
        if name not in self._specs:
            entry = self.runtime.pipeline.models.get(name)
            if entry is None:
                raise RunnerError(f"unknown model '{name}'")
            scope = {"env": self.runtime.env, "params": self.runtime.params, "run": self.runtime.run_info}
            from ..context import render_at
            rendered = render_at(self.runtime, entry, ("models", name), scope)
            self._specs[name] = build_spec(name, rendered)
        return self._specs[name]

    def enabled(self, name: str) -> bool:
        return self.spec(name).enabled

    @property
    def cache(self) -> JsonCache:
        if self._cache is None:
            self._cache = JsonCache(self.options.cache_dir / "responses")
        return self._cache

    def _secrets(self) -> list[str]:
        secrets = [s.api_key for s in self._specs.values() if s.api_key]
        secrets += [v for k, v in self.runtime.env.items() if SECRET_NAME.search(k) and len(v) >= 6]
        return secrets

    def redact(self, text: str) -> str:
        for secret in self._secrets():
            text = text.replace(secret, "***")
        return text

    # -- the call ------------------------------------------------------------------
    async def call(self, request: CallRequest) -> dict[str, Any]:
        """A parsed answer, or StepError carrying what is known (raw answer, error)."""
        spec = self.spec(request.model)
        stats = self.stats.setdefault(spec.name, ModelStats())
        sampling = {**spec.sampling, **{k: v for k, v in request.sampling.items() if v is not None}}
        if "temperature" in sampling:
            sampling["temperature"] = float(sampling["temperature"])
        messages = [dict(m) for m in request.messages]
        started = time.perf_counter()
        raw: str | None = None
        for attempt in range(request.repair + 1):
            key = request_key(model=spec.model, api_base=spec.api_base, messages=messages, sampling=sampling,
                              output_schema=request.output_schema, sample=request.sample,
                              extra=spec.extra or None)
            cached = None if self.options.no_cache else self.cache.get(key)
            seq = self._next_seq(request.item)
            began = time.time_ns()
            if self.options.render:
                self._render_call(spec, messages, cached is not None)
                if cached is None:
                    raise NeedsModel(f"{spec.name} has no cached answer")
            if cached is not None:
                stats.cache_hits += 1
                completion = Completion(cached["content"], cached.get("finish_reason"), cached.get("usage", {}),
                                        0.0, cached.get("model", spec.model))
            else:
                try:
                    completion = await self._send(spec, messages, sampling, stats)
                    problem = self._answer_problem(completion)
                    if problem:
                        raise TransportError("answer", problem)
                except TransportError as exc:
                    stats.failures += 1
                    message = self.redact(exc.message if exc.kind == "budget" else f"{spec.describe()}: {exc.message}")
                    self._log(request.item, seq, spec, messages, f"ERROR: {message}", False)
                    self._observe(request, spec, messages, began, None, error=message, attempts=exc.attempts)
                    raise StepError(message, partial=self._result(spec, None, None, completion=None,
                                                                  cached=False, started=started,
                                                                  error=message)) from None
            raw = completion.text or ""
            self._log(request.item, seq, spec, messages, raw, cached is not None)
            self._observe(request, spec, messages, began, completion, cached=cached is not None)
            try:
                parsed = parse_answer(raw, request.output_schema, request.as_json)
            except ParseFailure as exc:
                if attempt < request.repair:
                    messages = [*messages, {"role": "assistant", "content": raw},
                                {"role": "user", "content": f"Your answer could not be used: {exc}. "
                                                            "Answer again, following the required format exactly."}]
                    continue
                stats.failures += 1
                message = f"{spec.describe()}: {exc}"
                raise StepError(message, partial=self._result(spec, None, raw, completion, cached is not None,
                                                              started, error=message)) from None
            if cached is None:
                self.cache.set(key, {"content": raw, "finish_reason": completion.finish_reason,
                                     "usage": completion.usage, "cost": completion.cost, "model": completion.model,
                                     "timestamp": datetime.now(UTC).isoformat(timespec="seconds")})
            return self._result(spec, parsed, raw, completion, cached is not None, started)
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _answer_problem(completion: Completion) -> str | None:
        if completion.choices == 0:
            return "the answer has no choices"
        if completion.finish_reason == "length":
            return "the answer was truncated (finish_reason=length): raise max_tokens or shorten the prompt"
        if completion.text is None or not completion.text.strip():
            return "the answer is empty"
        return None

    def _result(self, spec: ModelSpec, parsed: Any, raw: str | None, completion: Completion | None,
                cached: bool, started: float, error: str | None = None) -> dict[str, Any]:
        return {"output": parsed, "raw": raw, "model": spec.name, "model_id": spec.model,
                "usage": completion.usage if completion else {}, "cost": completion.cost if completion else 0.0,
                "cached": cached, "latency_ms": round((time.perf_counter() - started) * 1000), "error": error}

    async def _send(self, spec: ModelSpec, messages: list[dict[str, Any]], sampling: dict[str, Any],
                    stats: ModelStats) -> Completion:
        if spec.api_base:
            await self._probe(spec)
        return await self._attempts(spec, messages, sampling, stats)

    async def _probe(self, spec: ModelSpec) -> None:
        """One TCP connect per endpoint before its first request: a refused endpoint opens
        the breaker before the rest of the run piles onto it."""
        probe = self._probes.get(spec.endpoint)
        if probe is None:
            probe = self._probes[spec.endpoint] = asyncio.ensure_future(tcp_refused(spec.api_base or ""))
        if await asyncio.shield(probe):
            self.breakers.setdefault(spec.endpoint, "connection refused")

    async def _attempts(self, spec: ModelSpec, messages: list[dict[str, Any]], sampling: dict[str, Any],
                        stats: ModelStats) -> Completion:
        if spec.endpoint in self.breakers:
            raise TransportError("breaker", self.breakers[spec.endpoint])
        gate = self._gate(spec)
        limit = spec.limits.get("requests_per_day")
        for attempt in range(spec.retries + 1):
            async with self._global_gate():
                async with gate:
                    if spec.endpoint in self.breakers:
                        raise TransportError("breaker", self.breakers[spec.endpoint])
                    if limit is not None:
                        try:
                            self._daily().spend(f"{spec.name}|{spec.model}", limit, spec.name)
                        except BudgetSpent as exc:
                            raise TransportError("budget", str(exc)) from None
                    stats.calls += 1
                    try:
                        completion = await self.transport.complete(spec, messages, sampling)
                        self._count(stats, completion)
                        completion.attempts = attempt + 1
                        return completion
                    except TransportError as exc:
                        error = exc
                        error.attempts = attempt + 1
            if error.opens_breaker:
                self.breakers[spec.endpoint] = error.message
                raise error
            if not error.retryable or attempt == spec.retries:
                raise error
            try:
                delay = retry_delay(attempt, spec.backoff, error.retry_after)
            except RetryAfterTooLong as too_long:
                raise TransportError(error.kind, f"{error.message} ({too_long})", error.status) from None
            stats.retries += 1
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _count(stats: ModelStats, completion: Completion) -> None:
        stats.prompt_tokens += completion.usage.get("prompt_tokens", 0)
        stats.completion_tokens += completion.usage.get("completion_tokens", 0)
        stats.total_tokens += completion.usage.get("total_tokens", 0)
        stats.cost += completion.cost

    def _global_gate(self) -> asyncio.Semaphore:
        if self._global is None:
            self._global = asyncio.Semaphore(max(1, self.options.llm_concurrency))
        return self._global

    def _gate(self, spec: ModelSpec) -> ModelGate:
        if spec.name not in self._gates:
            self._gates[spec.name] = ModelGate(spec.limits.get("concurrency"), spec.limits.get("requests_per_minute"))
        return self._gates[spec.name]

    def _daily(self) -> DailyBudget:
        if self._budget is None:
            self._budget = DailyBudget(self.options.cache_dir)
        return self._budget

    # -- logs, render, summary ---------------------------------------------------------
    def _next_seq(self, item: int) -> int:
        self._seq[item] = self._seq.get(item, 0) + 1
        return self._seq[item]

    def _log(self, item: int, seq: int, spec: ModelSpec, messages: list[dict[str, Any]], response: str,
             cached: bool) -> None:
        if self.options.render or self.options.out_dir is None:
            return
        if self._logs is None:
            self._logs = CallLogWriter(self.options.out_dir / "llm_logs")
        self._logs.add(item, seq, spec.name, self.redact(format_messages(messages)), self.redact(response), cached)

    def _observe(self, request: CallRequest, spec: ModelSpec, messages: list[dict[str, Any]], began: int,
                 completion: Completion | None, cached: bool = False, error: str | None = None,
                 attempts: int = 0) -> None:
        self.runtime.observer.llm_call(LLMCall(
            request.item, spec.name, spec.model, spec.endpoint, messages,
            completion.text if completion else None, began, time.time_ns(), cached,
            0 if cached else completion.attempts if completion else attempts,
            completion.usage if completion else {}, error))

    def _render_call(self, spec: ModelSpec, messages: list[dict[str, Any]], cached: bool) -> None:
        stream = self.runtime.render_stream
        stats = self.runtime.render_stats
        text = format_messages(messages)
        stats["calls"] += 1
        stats["cached"] += int(cached)
        stats["tokens"] += max(1, len(text) // 4)
        if stream is not None:
            stream.write(f"--- LLM call: model {spec.name} ({spec.model}) "
                         f"{'[cached]' if cached else '[not cached]'} ---\n{text}\n--- end ---\n")

    def summary(self, results: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"models": {name: vars(s) | {"cost": round(s.cost, 6)} for name, s in self.stats.items()}}
        hints = []
        for endpoint, message in self.breakers.items():
            names = sorted({s.name for s in self._specs.values() if s.endpoint == endpoint})
            hints.append(f"{', '.join(names)} unreachable ({message}): start a model server there "
                         f"(LM Studio, Ollama, llama.cpp), point it elsewhere with "
                         f"--set models.{names[0]}.api_base=URL, or set the provider's API key.")
        if hints:
            out["hints"] = hints
        return out

    async def aclose(self) -> None:
        if self._logs is not None:
            self._logs.finish()
        await self.transport.aclose()
        if self._cache is not None:
            self._cache.close()
        if self._budget is not None:
            self._budget.close()


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
