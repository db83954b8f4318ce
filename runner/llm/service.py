"""One run's LLM service: specs, cache, render mode, parsing, repair, logs, stats.

It knows model specs (through a resolver the run gives it) and a transport, not the
run itself; sending (gates, retries, deadlines, formats) lives in sender.py."""

from __future__ import annotations

import asyncio
import functools
import itertools
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from runner.errors import NeedsModel, StepError
from runner.llm.cache import request_key, usable
from runner.llm.in_flight import ItemsInFlight
from runner.llm.logs import CallLogWriter, LogCollector, format_messages, log_body, pending_name
from runner.llm.parsing import ParseFailure, parse_answer
from runner.llm.routing import RoutedTransport, http_process_mode
from runner.llm.sender import ModelStats, Sender
from runner.llm.shared_client import SharedClient
from runner.llm.spec import ModelSpec, batch_choice
from runner.llm.tally import FailureTally
from runner.llm.transport import Completion, Transport, TransportError
from runner.llm.writer import BackgroundWriter, SharedCache
from runner.observe import NULL_OBSERVER, LLMCall, Observer
from runner.redact import environment_secrets
from runner.redact import redact as redact_urls
from runner.safetext import clean_text, clean_value
from runner.stores.json_cache import JsonCache

if TYPE_CHECKING:
    from runner.llm.batch import BatchCollector

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
MIN_SECRET = 8          # shorter values are dummies (`x`, `none`), and replacing them mangles text
DUMMY_KEYS = {"no-key-needed", "sk-no-key-required", "not-needed", "lm-studio", "ollama", "none", "dummy",
              "empty", "changeme", "sk-dummy", "sk-local"}
_GROUPS = itertools.count(1)


def new_group() -> int:
    """A fresh id for the calls of one step run (one llm call, or the seats of one jury)."""
    return next(_GROUPS)


class ServiceOptions(Protocol):
    cache_dir: Path
    no_cache: bool
    llm_concurrency: int
    concurrency_given: bool
    out_dir: Path | None
    render: bool
    worker: bool
    http_process: str


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
    group: int = 0                     # calls of one step run share it (see tally.py)


class CallPreview(Protocol):
    """`runner render`'s sink (runner/render/sink.py): takes each call instead of a model."""

    def call(self, spec: ModelSpec, prompt_text: str, cached: dict[str, Any] | None,
             sampling: dict[str, Any], mode: str) -> None: ...


class LLMService:
    def __init__(self, resolve: Callable[[str], ModelSpec], options: ServiceOptions, env: Mapping[str, str],
                 transport: Transport | None = None, render: CallPreview | None = None,
                 observer: Observer = NULL_OBSERVER, cache: JsonCache | None = None,
                 in_flight: ItemsInFlight | None = None, shared: SharedClient | None = None):
        self.resolve = resolve
        self.observer = observer
        self.options = options
        self.env = env
        # A Ray worker's process is one of many on its machine: no second process of its own.
        http_process = "off" if options.worker else http_process_mode(options.http_process)
        self.sender = shared.sender if shared is not None else Sender(
            transport or RoutedTransport(http_process), options.cache_dir, options.llm_concurrency,
            options.concurrency_given)
        self.render_sink = render
        self._specs: dict[str, ModelSpec] = {}
        self._shared, self._cache = shared, (shared.cache if shared is not None else cache)
        self._logs: CallLogWriter | LogCollector | None = None
        self._naming: asyncio.Task[None] | None = None
        self._writer = shared.writer if shared is not None else BackgroundWriter()   # cache writes, log files
        self._seq: dict[int, int] = {}
        self._messages: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None   # the last asked, as sent
        self._secret_list: tuple[int, list[str]] = (-1, [])
        self._environment = environment_secrets()      # read once: a run's environment does not change
        self.stats: dict[str, ModelStats] = {}
        self.tally = FailureTally()
        self.in_flight = in_flight
        self._batches: BatchCollector | None = None

    # -- models --------------------------------------------------------------------
    def spec(self, name: str) -> ModelSpec:
        if name not in self._specs:
            self._specs[name] = batch_choice(self.resolve(name), getattr(self.options, "batch", False))
        return self._specs[name]

    @property
    def batches(self) -> BatchCollector:
        if self._batches is None:
            from runner.llm.batch import BatchCollector
            self._batches = BatchCollector(self.options.cache_dir, self.sender.formats, self.stats, self.sender.send,
                                           self.in_flight)
        return self._batches

    def enabled(self, name: str) -> bool:
        return self.spec(name).enabled

    @property
    def breakers(self) -> dict[str, str]:
        return self.sender.breakers

    @property
    def cache(self) -> JsonCache:
        if self._cache is None:
            self._cache = JsonCache(self.options.cache_dir / "responses")
        return self._cache

    def _secrets(self) -> list[str]:
        if self._secret_list[0] != len(self._specs):
            values = [s.api_key for s in self._specs.values() if s.api_key]
            values += [v for k, v in self.env.items() if SECRET_NAME.search(k)]
            secrets = sorted({v for v in values if len(v) >= MIN_SECRET and v.lower() not in DUMMY_KEYS},
                             key=len, reverse=True)
            self._secret_list = (len(self._specs), secrets)
        return self._secret_list[1]

    def redact(self, text: str) -> str:
        text = redact_urls(text, self._environment)
        for secret in self._secrets():
            if secret in text:
                text = text.replace(secret, "***")
        return text

    # -- the call ------------------------------------------------------------------
    async def call(self, request: CallRequest) -> dict[str, Any]:
        """A parsed answer, or StepError carrying what is known (raw answer, error)."""
        spec = self.spec(request.model)
        group = request.group or new_group()
        try:
            answer = await self._call(spec, request)
        except StepError as exc:
            self.tally.failure(request.item, group, spec.endpoint, exc.message)
            raise
        self.tally.answer(request.item, group, None if answer["cached"] else spec.endpoint)
        return answer

    async def _call(self, spec: ModelSpec, request: CallRequest) -> dict[str, Any]:
        stats = self.stats.setdefault(spec.name, ModelStats())
        sampling = {**spec.sampling, **{k: v for k, v in request.sampling.items() if v is not None}}
        if "temperature" in sampling:
            sampling["temperature"] = float(sampling["temperature"])
        messages = self._sendable(request.messages)
        schema = request.output_schema
        started = time.perf_counter()
        raw: str | None = None
        for attempt in range(request.repair + 1):
            mode = self.sender.formats.first(spec, schema) if schema is not None else "none"
            key = self._key(spec, messages, sampling, request, mode)
            cached = None if self.options.no_cache else usable(self._writer.pending.get(key) or await self._cached(key))
            seq = self._next_seq(request.item)
            began = time.time_ns()
            if self.options.render:
                self._render_call(spec, messages, cached, sampling, mode if schema is not None else "")
                if cached is None:
                    raise NeedsModel(f"{spec.name} has no cached answer")
            if cached is not None:
                stats.cache_hits += 1
                completion = Completion(cached["content"], cached.get("finish_reason"), cached.get("usage", {}),
                                        0.0, cached.get("model", spec.model))
            else:
                try:
                    if spec.batch:
                        from runner.llm.batch import BatchCall
                        call = BatchCall(spec, request.item, messages, sampling, schema,
                                         functools.partial(self._key, spec, messages, sampling, request))
                        completion, sent = await self.batches.send(call, mode, stats)
                    else:
                        completion, sent = await self.sender.send(spec, messages, sampling, schema, mode, stats)
                except TransportError as exc:
                    stats.failures += 1
                    message = self.redact(exc.message if exc.kind == "budget" else f"{spec.describe()}: {exc.message}")
                    self._log(request.item, seq, spec, messages, f"ERROR: {message}")
                    self._observe(request, spec, messages, began, None, error=message, attempts=exc.attempts)
                    raise StepError(message, partial=self._result(spec, None, None, None, False, started,
                                                                  error=message)) from None
                if completion.text:
                    completion.text = self.redact(clean_text(completion.text))     # a model may echo a key it saw
                problem = self._answer_problem(spec, completion, sampling)
                if problem:
                    stats.failures += 1
                    message = f"{spec.describe()}: {problem}"
                    self._log(request.item, seq, spec, messages, f"ERROR: {message}\n\n{completion.text or ''}")
                    self._observe(request, spec, messages, began, completion, error=message)
                    raise StepError(message, partial=self._result(spec, None, completion.text, completion, False,
                                                                  started, error=message))
                if sent != mode:
                    key = self._key(spec, messages, sampling, request, sent)
            raw = completion.text or ""
            self._log(request.item, seq, spec, messages, raw)
            self._observe(request, spec, messages, began, completion, cached=cached is not None)
            try:
                # A cached answer passed this very schema (the key holds it) before it was stored.
                check = None if cached is not None else schema
                parsed = parse_answer(raw, check, request.as_json or schema is not None)
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
                entry = {"content": raw, "finish_reason": completion.finish_reason, "usage": completion.usage,
                         "cost": completion.cost, "model": completion.model,
                         "timestamp": datetime.now(UTC).isoformat(timespec="seconds")}
                if hasattr(self.cache, "aset"):
                    await self._writer.cache_set_shared(cast(SharedCache, self.cache), key, entry)
                else:
                    self._writer.cache_set(self.cache, key, entry)
            return self._result(spec, parsed, raw, completion, cached is not None, started)
        raise AssertionError("unreachable")  # pragma: no cover

    def _sendable(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The messages as sent, keyed and logged (UTF-8 throughout): one list for every seat
        of a jury, which send the same messages, so their JSON is made once (shared_json.py)."""
        known = self._messages
        if known is None or known[0] is not messages:
            known = self._messages = (messages, [clean_value(dict(m)) for m in messages])
        return known[1]

    async def _cached(self, key: str) -> Any:
        """The cache's entry for `key`: asked of the cache's owner when the cache is another
        process's (a Ray worker on another machine), read here otherwise."""
        cache = self.cache
        remote = getattr(cache, "aget", None)
        return await remote(key) if remote is not None else cache.get(key)

    @staticmethod
    def _key(spec: ModelSpec, messages: list[dict[str, Any]], sampling: dict[str, Any], request: CallRequest,
             mode: str) -> str:
        return request_key(model=spec.model, api_base=spec.api_base, messages=messages, sampling=sampling,
                           response_format=None if mode == "none" else mode, output_schema=request.output_schema,
                           sample=request.sample, extra=spec.extra or None, cache_as=spec.cache_as)

    @staticmethod
    def _answer_problem(spec: ModelSpec, completion: Completion, sampling: dict[str, Any]) -> str | None:
        if completion.choices == 0:
            return "the answer has no choices"
        if completion.finish_reason == "length":
            limit = sampling.get("max_tokens")
            return (f"the answer was truncated (finish_reason=length) at max_tokens={limit}: raise it with "
                    f"`max_tokens:` on the step or on the model (--set models.{spec.name}.max_tokens="
                    f"{2 * int(limit or 1024)}), or ask for a shorter answer")
        if completion.finish_reason == "content_filter":
            return "the provider's content filter stopped the answer (finish_reason=content_filter)"
        if completion.text is None or not completion.text.strip():
            return "the answer is empty"
        return None

    def _result(self, spec: ModelSpec, parsed: Any, raw: str | None, completion: Completion | None,
                cached: bool, started: float, error: str | None = None) -> dict[str, Any]:
        return {"output": parsed, "raw": raw, "model": spec.name, "model_id": spec.model,
                "usage": completion.usage if completion else {}, "cost": completion.cost if completion else 0.0,
                "cached": cached, "latency_ms": round((time.perf_counter() - started) * 1000), "error": error}

    # -- logs, render, summary ---------------------------------------------------------
    def _next_seq(self, item: int) -> int:
        self._seq[item] = self._seq.get(item, 0) + 1
        return self._seq[item]

    def flush(self) -> None:
        """Wait until every log and cache write handed to the writer thread is done."""
        self._writer.flush()

    @property
    def logs(self) -> CallLogWriter | LogCollector | None:
        return self._logs

    def log_writer(self) -> CallLogWriter | LogCollector | None:
        if self.options.render or self.options.out_dir is None:
            return None
        if self._logs is None:
            # A Ray worker keeps its logs for the driver, which writes the run folder.
            self._logs = (LogCollector() if getattr(self.options, "worker", False)
                          else CallLogWriter(self.options.out_dir / "llm_logs"))
        return self._logs

    def _log(self, item: int, seq: int, spec: ModelSpec, messages: list[dict[str, Any]], response: str) -> None:
        """The call's log, formatted here; its file written by the writer (at once while files
        are quick to write, else by its thread; the run's end waits for every log), a Ray
        worker's kept for its driver."""
        logs = self.log_writer()
        if logs is None:
            return
        name = pending_name(item, seq, spec.name)
        body = log_body(self.redact(format_messages(messages)), self.redact(response))
        if isinstance(logs, LogCollector):
            logs.put(name, body)
        elif not logs.spooled(name, body):
            self._writer.submit(functools.partial(logs.put, name, body))

    def _observe(self, request: CallRequest, spec: ModelSpec, messages: list[dict[str, Any]], began: int,
                 completion: Completion | None, cached: bool = False, error: str | None = None,
                 attempts: int = 0) -> None:
        if self.observer is NULL_OBSERVER:       # no tracing: nothing to build
            return
        self.observer.llm_call(LLMCall(
            request.item, spec.name, spec.model, redact_urls(spec.endpoint, self._environment), messages,
            completion.text if completion else None, began, time.time_ns(), cached,
            0 if cached else completion.attempts if completion else attempts,
            completion.usage if completion else {}, error))

    def _render_call(self, spec: ModelSpec, messages: list[dict[str, Any]], cached: dict[str, Any] | None,
                     sampling: dict[str, Any], mode: str) -> None:
        if self.render_sink is None:
            return
        if not mode:
            label = "none (no output schema)"
        else:     # the mode this endpoint uses now: the configured one, or what the fallback ladder learned
            label = mode + (f" (configured {spec.structured_output})" if spec.structured_output != mode else "")
        self.render_sink.call(spec, format_messages(messages), cached, sampling, label)

    def summary(self, results: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"models": {name: vars(s) | {"cost": round(s.cost, 6)} for name, s in self.stats.items()}}
        hints = []
        for endpoint, message in self.breakers.items():
            names = sorted({s.name for s in self._specs.values() if s.endpoint == endpoint})
            hints.append(f"{', '.join(names)} unreachable ({message}): start a model server there "
                         f"(LM Studio, Ollama, llama.cpp), point it elsewhere with "
                         f"--set models.{names[0]}.api_base=URL, or set the provider's API key.")
        for endpoint, tally in self.tally.dead_endpoints().items():
            if endpoint not in self.breakers:
                names = sorted({s.name for s in self._specs.values() if s.endpoint == endpoint})
                hints.append(f"every call to {', '.join(names)} at {endpoint} failed ({tally.failed} call(s)); "
                             f"the last: {tally.last_error}")
        if hints:
            out["hints"] = [self.redact(hint) for hint in hints]
        if self._batches is not None and self._batches.models:
            out["batches"] = self._batches.summary()
        return out

    def progress_note(self) -> str:
        """Each batch's state and counts, for the progress line ('' without batches)."""
        return self._batches.progress() if self._batches is not None else ""
    def settle(self, item: object) -> tuple[bool, str]:
        """A finished item: whether its LLM work got no usable answer (and its last call's error);
        what was kept for it is dropped."""
        if isinstance(item, int):
            self._seq.pop(item, None)
        return self.tally.settle(item)

    def failed_items(self) -> set[int]:
        """Items whose LLM work got no usable answer (see tally.py): they count as errors."""
        return self.tally.failed_items()

    def failure_reasons(self) -> dict[int, str]:
        return self.tally.failure_reasons()

    async def logs_named(self) -> None:
        """Once the call logs have their final names (the log process may still be naming
        them when aclose returns)."""
        naming, self._naming = self._naming, None
        if naming is not None:
            await naming

    async def aclose(self) -> None:
        self._writer.flush() if self._shared is not None else self._writer.close()
        if isinstance(self._logs, CallLogWriter):
            self._naming = self._logs.end()
        if self._batches is not None:
            await self._batches.aclose()
        if self._shared is None:          # a shared sender and cache are closed by their owner
            await self.sender.aclose()
            if self._cache is not None:
                self._cache.close()

