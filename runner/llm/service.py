"""One run's LLM service: a step's call from its messages to a parsed answer (`embed`: to the vectors of its texts).

It looks the answer up in the cache, else sends the request (the client: limits, retries, deadlines,
structured output), checks and parses the answer (re-asking when the step allows), stores it in the
cache and writes the call's line of calls.jsonl, and counts calls, tokens and failures for the summary.
It knows model specs (through a resolver the run gives it), not the run itself."""

from __future__ import annotations

import functools
import itertools
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from runner.engine.in_flight import ItemsInFlight
from runner.engine.observe import NULL_OBSERVER, LLMCall, Observer
from runner.errors import NeedsModel, StepError
from runner.llm import logprobs
from runner.llm.cache.entries import cached_completion, new_entry, usable
from runner.llm.cache.key import request_key
from runner.llm.cache.store import JsonCache
from runner.llm.calls.file import CallsFile, KeptCalls
from runner.llm.calls.record import call_record, format_messages, line_of
from runner.llm.client.parsing import ParseFailure, parse_answer
from runner.llm.client.routing import RoutedTransport
from runner.llm.client.sender import ModelStats, Sender
from runner.llm.client.spec import ModelSpec, batch_choice
from runner.llm.client.transport import Completion, Transport, TransportError
from runner.llm.shared_client import SharedClient
from runner.llm.tally import FailureTally
from runner.llm.writer import CallLines, SharedCache, Writer
from runner.redact import environment_secrets, is_secret, named_secrets
from runner.redact import redact as redact_text
from runner.runs.folders import CALLS_FILE
from runner.safetext import clean_text, clean_value

if TYPE_CHECKING:
    from runner.llm.batch.collector import BatchCollector

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


@dataclass
class CallRequest:
    model: str                         # a name under models:
    messages: list[dict[str, Any]]
    item: int
    step: str = ""                     # the id of the step that asks
    output_schema: dict[str, Any] | None = None
    as_json: bool = False
    repair: int = 0
    sampling: dict[str, Any] = field(default_factory=dict)
    sample: int = 0
    group: int = 0                     # calls of one step run share it (see tally.py)
    logprobs: bool = False             # ask for token probabilities (a step's `confidence: true`)
    embed: bool = False                # an embeddings request: the messages' contents are the texts


def call_lines(options: ServiceOptions, kept: bool) -> CallLines | None:
    """Where a run's calls go: its calls.jsonl, kept for a worker's report to the driver (`kept`),
    or nowhere (render)."""
    if options.render or options.out_dir is None:
        return None
    return KeptCalls() if kept else CallsFile(options.out_dir / CALLS_FILE)


class CallPreview(Protocol):
    """`runner render`'s sink (runner/render/sink.py): takes each call instead of a model."""

    def call(self, spec: ModelSpec, prompt_text: str, cached: dict[str, Any] | None,
             sampling: dict[str, Any], mode: str) -> None: ...


class LLMService:
    def __init__(self, resolve: Callable[[str], ModelSpec], options: ServiceOptions, env: Mapping[str, str],
                 transport: Transport | None = None, render: CallPreview | None = None,
                 observer: Observer = NULL_OBSERVER, cache: JsonCache | None = None,
                 in_flight: ItemsInFlight | None = None, shared: SharedClient | None = None,
                 kept_calls: bool = False):
        self.resolve = resolve
        self.observer = observer
        self.options = options
        self._borrowed: Counter[tuple[str, str, str]] = Counter()     # (seat, cache_as, made by): answers
        self.env = env
        self.sender = shared.sender if shared is not None else Sender(
            transport or RoutedTransport(), options.cache_dir, options.llm_concurrency, options.concurrency_given)
        self.render_sink = render
        self._specs: dict[str, ModelSpec] = {}
        self._shared, self._cache = shared, (shared.cache if shared is not None else cache)
        self._writer = Writer(call_lines(options, kept_calls))      # this run's calls.jsonl (and, alone, its answers)
        # One cache writer for every service of a long-lived process: an uncommitted answer is found by all.
        self._answers = shared.writer if shared is not None else self._writer
        self._seq: dict[int, int] = {}
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
            from runner.llm.batch.collector import BatchCollector
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
            keys = {s.api_key for s in self._specs.values() if s.api_key and is_secret(s.api_key)}
            secrets = sorted(keys | named_secrets(self.env), key=len, reverse=True)
            self._secret_list = (len(self._specs), secrets)
        return self._secret_list[1]

    def redact(self, text: str) -> str:
        return redact_text(text, self._environment, self._secrets())

    # -- the call ------------------------------------------------------------------
    async def call(self, request: CallRequest) -> dict[str, Any]:
        """A parsed answer, or StepError carrying what is known (raw answer, error)."""
        spec = self.spec(request.model)
        group = request.group or new_group()
        endpoint = redact_text(spec.endpoint, self._environment)      # as calls.jsonl names it
        try:
            answer = await self._call(spec, request)
        except StepError as exc:
            self.tally.failure(request.item, group, spec.name, endpoint, exc.message)
            raise
        self.tally.answer(request.item, group, spec.name, endpoint, sent=not answer["cached"])
        return answer

    async def _call(self, spec: ModelSpec, request: CallRequest) -> dict[str, Any]:
        """The answer; a sweep's call known to fail (`failed_calls`) fails with its error; one failing is added."""
        failed, keys = getattr(self.options, "failed_calls", None), cast(list[str], [])
        try:
            return await self._attempts(spec, request, keys, failed)
        except StepError as exc:
            if failed is not None and keys:
                failed.setdefault(keys[0], exc.message)
            raise

    async def _attempts(self, spec: ModelSpec, request: CallRequest, keys: list[str],
                        failed: dict[str, str] | None) -> dict[str, Any]:
        stats = self.stats.setdefault(spec.name, ModelStats())
        sampling = {**spec.sampling, **{k: v for k, v in request.sampling.items() if v is not None}}
        if "temperature" in sampling:
            sampling["temperature"] = float(sampling["temperature"])
        messages = [clean_value(dict(m)) for m in request.messages]     # as sent, keyed and logged: UTF-8
        schema, sent_params = request.output_schema, {**sampling, **logprobs.REQUEST} if request.logprobs else sampling
        started = time.perf_counter()
        raw: str | None = None
        tried = 0                      # requests sent, retries included (a cached answer sends none)
        for attempt in range(request.repair + 1):
            mode = self.sender.formats.first(spec, schema) if schema is not None else "none"
            key = self._key(spec, messages, sampling, request, mode)
            cached = None if self.options.no_cache else usable(
                self._answers.pending.get(key) or await self._cached(key), request.embed)
            keys.append(key)            # the first attempt's key names a failed call
            if cached is None and failed is not None and key in failed:
                stats.failures += 1
                raise StepError(failed[key], partial=self._result(spec, None, None, None, False, started, failed[key]))
            seq, began = self._next_seq(request.item), time.time_ns()
            if self.options.render:
                self._render_call(spec, messages, cached, sent_params,
                                  "embeddings" if request.embed else mode if schema is not None else "")
                if cached is None:
                    raise NeedsModel(f"{spec.name} has no cached answer")
            if cached is not None:
                stats.cache_hits += 1
                self._note_borrowed(spec, cached)
                completion = cached_completion(cached, spec.model)
            else:
                try:
                    if spec.batch and not request.embed:
                        from runner.llm.batch.calls import BatchCall
                        call = BatchCall(spec, request.item, messages, sent_params, schema,
                                         functools.partial(self._key, spec, messages, sampling, request))
                        completion, sent = await self.batches.send(call, mode, stats)
                    else:
                        completion, sent = await self.sender.send(spec, messages, sent_params, schema, mode, stats,
                                                                  request.embed)
                except TransportError as exc:
                    tried += exc.attempts
                    stats.failures += 1
                    message = self.redact(exc.message if exc.kind == "budget" else f"{spec.describe()}: {exc.message}")
                    self._done(request, seq, spec, messages, key, began, None, error=message, attempts=exc.attempts)
                    raise StepError(message, partial=self._result(spec, None, None, None, False, started,
                                                                  error=message, made=(attempt + 1, tried))) from None
                tried += completion.attempts
                if completion.text:
                    completion.text = self.redact(clean_text(completion.text))     # a model may echo a key it saw
                problem = completion.problem(spec.name, sampling.get("max_tokens"))
                if problem:
                    stats.failures += 1
                    message = self.redact(f"{spec.describe()}: {problem}")
                    self._done(request, seq, spec, messages, key, began, completion, error=message)
                    raise StepError(message, partial=self._result(spec, None, completion.text, completion, False,
                                                                  started, error=message, made=(attempt + 1, tried)))
                if sent != mode:
                    key = self._key(spec, messages, sampling, request, sent)
            raw = completion.text or ""
            try:
                # A cached answer passed this very schema (the key holds it) before it was stored.
                check = None if cached is not None else schema
                parsed = parse_answer(raw, check, request.as_json or schema is not None)
            except ParseFailure as exc:       # the call's line says its answer could not be used
                self._done(request, seq, spec, messages, key, began, completion, cached=cached is not None,
                           error=self.redact(f"{spec.describe()}: {exc}"))
                if attempt < request.repair:
                    messages = [*messages, {"role": "assistant", "content": raw},
                                {"role": "user", "content": f"Your answer could not be used: {exc}. "
                                                            "Answer again, following the required format exactly."}]
                    continue
                stats.failures += 1
                message = f"{spec.describe()}: {exc}"
                raise StepError(message, partial=self._result(spec, None, raw, completion, cached is not None,
                                                              started, message, (attempt + 1, tried))) from None
            self._done(request, seq, spec, messages, key, began, completion, cached=cached is not None)
            if cached is None:
                stats.answered += 1
                entry = new_entry(raw, completion, request.logprobs, made_by=self._made_by(spec))
                if hasattr(self.cache, "aset"):
                    await self._answers.cache_set_shared(cast(SharedCache, self.cache), key, entry)
                else:
                    self._answers.cache_set(self.cache, key, entry)
            return self._result(spec, parsed, raw, completion, cached is not None, started, made=(attempt + 1, tried),
                                **logprobs.carried(completion.logprobs, request.logprobs),
                                **cast(dict[str, Any], {"vectors": completion.vectors} if request.embed else {}))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _cached(self, key: str) -> Any:
        """The cache's entry for `key`: asked of the cache's owner (a Ray worker on another machine's), or read here."""
        cache = self.cache
        remote = getattr(cache, "aget", None)
        return await remote(key) if remote is not None else cache.get(key)

    def _key(self, spec: ModelSpec, messages: list[dict[str, Any]], sampling: dict[str, Any], request: CallRequest,
             mode: str) -> str:
        cache_as = None if getattr(self.options, "no_cache_as", False) else spec.cache_as
        return request_key(model=spec.model, api_base=spec.api_base, messages=messages, sampling=sampling,
                           response_format=None if mode == "none" else mode, output_schema=request.output_schema,
                           sample=request.sample, extra=spec.extra or None, cache_as=cache_as,
                           logprobs=request.logprobs, embeddings=request.embed)

    def _made_by(self, spec: ModelSpec) -> str:
        return self.redact(f"{spec.model} at {spec.api_base or 'its provider'}")

    def _note_borrowed(self, spec: ModelSpec, cached: dict[str, Any]) -> None:
        """A `cache_as` answer made by another model or endpoint: counted, and said at the end."""
        made_by = cached.get("made_by") if spec.cache_as and not getattr(self.options, "no_cache_as", False) else None
        if isinstance(made_by, str) and made_by != self._made_by(spec):
            self._borrowed[(spec.name, str(spec.cache_as), self.redact(made_by))] += 1

    def _result(self, spec: ModelSpec, parsed: Any, raw: str | None, completion: Completion | None, cached: bool,
                started: float, error: str | None = None, made: tuple[int, int] = (1, 0),
                **extra: Any) -> dict[str, Any]:
        """A call's result; `made`: the requests made (a re-ask is one more) and their sends (retries too)."""
        return {"output": parsed, "raw": raw, "model": spec.name, "model_id": spec.model,
                "usage": completion.usage if completion else {}, "cost": completion.cost if completion else 0.0,
                "cached": cached, "latency_ms": round((time.perf_counter() - started) * 1000), "error": error,
                "calls": made[0], "attempts": made[1], **extra}

    # -- logs, render, summary ---------------------------------------------------------
    def _next_seq(self, item: int) -> int:
        self._seq[item] = self._seq.get(item, 0) + 1
        return self._seq[item]

    def flush(self) -> None:
        """Write every answer and call line handed to the writers so far."""
        self._answers.flush()
        self._writer.flush()

    def take_calls(self) -> list[bytes]:
        """A Ray worker's lines of calls.jsonl since the last report (flushed first)."""
        self._writer.flush()
        calls = self._writer.calls
        return calls.take() if isinstance(calls, KeptCalls) else []

    def add_calls(self, lines: list[bytes]) -> None:
        """Lines of calls.jsonl a Ray worker made, appended to this run's."""
        self._writer.add_calls(lines)

    def _done(self, request: CallRequest, seq: int, spec: ModelSpec, messages: list[dict[str, Any]], key: str,
              began: int, completion: Completion | None, cached: bool = False, error: str | None = None,
              attempts: int = 0) -> None:
        """The call's line of calls.jsonl (secrets taken out), and its tracing event."""
        ended = time.time_ns()
        error = self.redact(error) if error else error        # a message may name the endpoint, query key and all
        answer = completion.text if completion else None
        attempts = 0 if cached else completion.attempts if completion else attempts
        usage = completion.usage if completion else {}
        if self._writer.calls is not None:
            self._writer.add_calls([line_of(call_record(
                item=request.item, call=f"{request.item}.{seq}", step=request.step, model=spec.name,
                model_id=spec.model, endpoint=redact_text(spec.endpoint, self._environment), key=key,
                messages=self._redacted(messages), answer=answer, usage=usage, attempts=attempts,
                began_ns=began, ended_ns=ended, cached=cached, error=error))])
        if self.observer is not NULL_OBSERVER:
            self.observer.llm_call(LLMCall(
                request.item, spec.name, spec.model, redact_text(spec.endpoint, self._environment), messages,
                answer, began, ended, cached, attempts, usage, error))

    def _redacted(self, value: Any) -> Any:
        """Every text in `value` (messages: contents, parts) without the run's secrets."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            return [self._redacted(inner) for inner in value]
        if isinstance(value, dict):
            return {name: self._redacted(inner) for name, inner in value.items()}
        return value

    def _render_call(self, spec: ModelSpec, messages: list[dict[str, Any]], cached: dict[str, Any] | None,
                     sampling: dict[str, Any], mode: str) -> None:
        if self.render_sink is None:
            return
        if not mode or mode == "embeddings":
            label = mode or "none (no output schema)"
        else:     # the mode this endpoint uses now: the configured one, or what the fallback ladder learned
            label = mode + (f" (configured {spec.structured_output})" if spec.structured_output != mode else "")
        self.render_sink.call(spec, format_messages(messages), cached, sampling, label)

    def summary(self, results: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"models": {name: vars(s) | {"cost": round(s.cost, 6)} for name, s in self.stats.items()}}
        unreachable = {redact_text(endpoint, self._environment): message for endpoint, message in self.breakers.items()}
        failed = [{**entry, "hint": self.redact(entry["hint"])} for entry in self.tally.failed_calls(unreachable)]
        borrowed = [f"{n} answer(s) of {name} came from the cache_as '{as_}' cache, made by {by}; --no-cache-as "
                    "keeps each endpoint's answers apart" for (name, as_, by), n in self._borrowed.items()]
        hints = [entry["hint"] for entry in failed] + borrowed
        out.update({"hints": hints} if hints else {}, **({"failed_calls": failed} if failed else {}))
        if self._batches is not None and self._batches.models:
            out["batches"] = self._batches.summary()
        return out

    def progress_note(self) -> str:
        """Each batch's state and counts, for the progress line ('' without batches)."""
        return self._batches.progress() if self._batches is not None else ""
    def settle(self, item: object) -> tuple[bool, str]:
        """A finished item: whether its LLM work got no usable answer (and its last error); its records dropped."""
        if isinstance(item, int):
            self._seq.pop(item, None)
        return self.tally.settle(item)

    def has_failed(self, item: int) -> bool:
        """Whether an item's LLM work has so far got no usable answer somewhere (settle forgets)."""
        return self.tally.has_failed(item)

    async def aclose(self) -> None:
        self._answers.flush()      # a shared writer stays open for the others (SharedClient closes it)
        self._writer.close()
        if self._batches is not None:
            await self._batches.aclose()
        if self._shared is None:          # a shared sender and cache are closed by their owner
            await self.sender.aclose()
            if self._cache is not None:
                self._cache.close()

