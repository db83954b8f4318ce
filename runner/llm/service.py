"""One run's LLM service: a step's call from its messages to a parsed answer (`embed`: to the vectors of its texts).

A call goes through layers around one transport, each with one job (runner/llm/request.py says
what they pass each other, runner/llm/layers.py holds them): the response cache and a sweep's
calls known to fail, the call log (calls.jsonl and tracing), reading the answer (`Parse`), then the
transport (`_send`: the client, or a provider's batch API); `Answers` asks again while
an answer that could not be read may be repaired. What makes the run may give another transport
and recorder (`runner render`'s, runner/render/sink.py). The service counts calls, tokens and
failures for the summary; it knows model specs (through a resolver the run gives it), not the run."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from runner.engine.observe import NULL_OBSERVER, ItemsInFlight, Observer
from runner.llm.cache.key import request_key
from runner.llm.cache.store import JsonCache
from runner.llm.calls.file import CallsFile, KeptCalls
from runner.llm.client.routing import RoutedTransport
from runner.llm.client.sender import ModelStats, Sender
from runner.llm.client.spec import ModelSpec, batch_choice
from runner.llm.client.transport import TransportError
from runner.llm.layers import Answers, Cache, CallFailed, CallLog, KnownFailures, Parse, RunCalls
from runner.llm.request import Ask, CallRequest, Failed, Layer, Recorder, Reply, new_group
from runner.llm.shared_client import SharedClient
from runner.llm.tally import FailureTally
from runner.llm.writer import Writer
from runner.redact import environment_secrets, hide_secrets, is_secret, named_secrets
from runner.redact import redact as redact_text
from runner.runs.folders import CALLS_FILE
from runner.runs.request import RunOptions
from runner.safetext import clean_text

if TYPE_CHECKING:
    from runner.llm.batch.collector import BatchCollector


class LLMService:
    def __init__(self, resolve: Callable[[str], ModelSpec], options: RunOptions, env: Mapping[str, str],
                 observer: Observer = NULL_OBSERVER, cache: JsonCache | None = None,
                 in_flight: ItemsInFlight | None = None, shared: SharedClient | None = None,
                 kept_calls: bool = False, transport: Layer | None = None, recorder: Recorder | None = None):
        """`transport` and `recorder`: where requests go and are recorded (default: sent, and
        written to calls.jsonl and the tracing observer)."""
        self.resolve = resolve
        self.options = options
        self.env = env
        self.sender = shared.sender if shared is not None else Sender(
            RoutedTransport(), options.cache_dir, options.llm_concurrency, options.concurrency_given)
        self._specs: dict[str, ModelSpec] = {}
        self._shared, self._cache = shared, (shared.cache if shared is not None else cache)
        # This run's calls.jsonl (a worker keeps its lines for the driver; no run folder: none) and, alone, its answers.
        out = options.out_dir
        self._writer = Writer(None if out is None else KeptCalls() if kept_calls else CallsFile(out / CALLS_FILE))
        # One cache writer for every service of a long-lived process: an uncommitted answer is found by all.
        self._answers = answers = shared.writer if shared is not None else self._writer
        self._secret_list: tuple[int, list[str]] = (-1, [])
        self._environment = environment_secrets()      # read once: a run's environment does not change
        self.stats: dict[str, ModelStats] = {}
        self.tally = FailureTally()
        self.in_flight = in_flight
        self._batches: BatchCollector | None = None
        # The layers, innermost first: each takes a request (an Ask) to the one below.
        self.log = CallLog(Parse(transport or self._send),
                           recorder or RunCalls(self._writer, observer, self.redact, self.endpoint, self.hide_secrets))
        self.known = KnownFailures(self.log, options.failed_calls)
        self.cached = Cache(self.known, lambda: self.cache, answers, options.no_cache, options.no_cache_as,
                            self._made_by, self.redact)
        self.answers = Answers(self.cached, self.sender.formats, self._key)

    # -- models --------------------------------------------------------------------
    def spec(self, name: str) -> ModelSpec:
        if name not in self._specs:
            self._specs[name] = batch_choice(self.resolve(name), self.options.batch)
        return self._specs[name]

    @property
    def batches(self) -> BatchCollector:
        if self._batches is None:
            from runner.llm.batch.collector import BatchCollector
            self._batches = BatchCollector(self.options.cache_dir, self.sender.formats, self.stats, self.sender.send,
                                           self.in_flight, self.sender.breakers)
        return self._batches

    def enabled(self, name: str) -> bool:
        return self.spec(name).enabled

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

    def hide_secrets(self, text: str) -> str:
        """What a model wrote or was sent, its known secrets hidden by value (runner.redact.hide_secrets)."""
        return hide_secrets(text, self._environment, self._secrets())

    def endpoint(self, spec: ModelSpec) -> str:
        """A model's endpoint as calls.jsonl and the summary name it."""
        return redact_text(spec.endpoint, self._environment)

    # -- the call ------------------------------------------------------------------
    async def call(self, request: CallRequest) -> dict[str, Any]:
        """A parsed answer, or StepError (CallFailed) carrying what is known (raw answer, error)."""
        spec = self.spec(request.model)
        group = request.group or new_group()
        try:
            answer = await self.answers.answer(spec, request, self.stats.setdefault(spec.name, ModelStats()))
        except CallFailed as exc:
            self.known.add(exc.key, exc.message)
            self.tally.failure(request.item, group, spec.name, self.endpoint(spec), exc.message)
            raise
        self.tally.answer(request.item, group, sent=not answer["cached"])
        return answer

    async def _send(self, ask: Ask) -> Reply:
        """The transport of a run that sends: the client, or the provider's batch API for a batch model."""
        spec, request = ask.spec, ask.request
        try:
            if spec.batch and not request.embed:
                from runner.llm.batch.polling import BatchCall
                call = BatchCall(spec, request.item, ask.messages, ask.params, request.output_schema, ask.key_for)
                completion, sent = await self.batches.send(call, ask.mode, ask.stats)
            else:
                completion, sent = await self.sender.send(spec, ask.messages, ask.params, request.output_schema,
                                                          ask.mode, ask.stats, request.embed,
                                                          functools.partial(setattr, ask, "sent", True))
        except TransportError as exc:
            raise Failed(self.redact(exc.message if exc.kind == "budget" else f"{spec.describe()}: {exc.message}"),
                         attempts=exc.attempts) from None
        if completion.text:
            completion.text = self.hide_secrets(clean_text(completion.text))   # a model may echo a key it saw
        reply = Reply(completion, ask.key, attempts=completion.attempts)
        problem = completion.problem(spec.name, ask.sampling.get("max_tokens"))
        if problem:
            raise Failed(self.redact(f"{spec.describe()}: {problem}"), reply)
        if sent != ask.mode:
            reply.key = ask.key_for(sent)
        return reply

    def _key(self, spec: ModelSpec, messages: list[dict[str, Any]], sampling: dict[str, Any], request: CallRequest,
             mode: str) -> str:
        cache_as = None if self.options.no_cache_as else spec.cache_as
        return request_key(model=spec.model, api_base=spec.api_base, messages=messages, sampling=sampling,
                           response_format=None if mode == "none" else mode, output_schema=request.output_schema,
                           sample=request.sample, extra=spec.extra or None, cache_as=cache_as,
                           logprobs=request.logprobs, embeddings=request.embed)

    def _made_by(self, spec: ModelSpec) -> str:
        return self.redact(f"{spec.model} at {spec.api_base or 'its provider'}")

    # -- calls.jsonl, summary -------------------------------------------------------
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
        """Lines of calls.jsonl made elsewhere (a worker, an earlier run), appended to this run's."""
        self._writer.add_calls(lines)

    def summary(self, results: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"models": {name: vars(s) | {"cost": round(s.cost, 6)} for name, s in self.stats.items()}}
        unreachable = {redact_text(endpoint, self._environment): why for endpoint, why in self.sender.breakers.items()}
        failed = [{**entry, "hint": self.redact(entry["hint"])}
                  for entry in self.tally.failed_calls(self.stats, unreachable)]
        hints = [entry["hint"] for entry in failed] + self.cached.hints()
        out.update({"hints": hints} if hints else {}, **({"failed_calls": failed} if failed else {}))
        if self._batches is not None and self._batches.models:
            out["batches"] = self._batches.summary()
        return out

    def progress_note(self) -> str:
        """Each batch's state and counts, for the progress line ('' without batches)."""
        return self._batches.progress() if self._batches is not None else ""

    def no_verdict(self, item: int, reason: str) -> None:
        self.tally.no_verdict(item, reason)

    def settle(self, item: object, keep: bool = False) -> tuple[bool, str, bool, bool]:
        """A finished item's outcome (runner/engine/services.py says what); forgotten unless `keep`."""
        if not keep:
            self.log.forget(item)
        return self.tally.settle(item, keep)

    async def aclose(self) -> None:
        self._answers.flush()      # a shared writer stays open for the others (SharedClient closes it)
        self._writer.close()
        if self._batches is not None:
            await self._batches.aclose()
        if self._shared is None:          # a shared sender and cache are closed by their owner
            await self.sender.aclose()
            if self._cache is not None:
                self._cache.close()
