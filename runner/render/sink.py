"""`runner render`'s (and a sweep's cache pass's) transport and recorder for the LLM service: it
answers nothing (what the cache does not hold stops the item with NeedsModel), and records each
request the run makes, cached or not, as calls.jsonl would: printed with where it would go and
how it would be asked, counted, and estimated. The closing estimate: per model, the calls a run
would make, how many are cached, estimated prompt and completion tokens, and the estimated cost
of the uncached ones by litellm's bundled price table (read as data, runner/llm/client/prices.py:
no litellm import)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from runner.errors import NeedsModel
from runner.llm.calls.record import format_messages
from runner.llm.client.prices import Price, batch_price_of, price_of
from runner.llm.request import Ask, Made, Reply
from runner.redact import redact

CHARS_PER_TOKEN = 4          # a rough, provider-neutral estimate; render never calls a tokenizer
FALLBACK_COMPLETION = 256    # when a model has no max_tokens and no cached answer to learn from


@dataclass
class ModelEstimate:
    model_id: str
    calls: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    cached_completion: list[int] = field(default_factory=list)
    uncached_prompt_tokens: int = 0
    max_tokens: int | None = None
    batch: bool = False               # answered through a batch API: the batch price
    embeddings: bool = False          # an embeddings model: its answers are vectors, no completion tokens
    local: bool = False               # its endpoint is on this machine (or its network): no price to pay

    def price(self) -> tuple[Price | None, str]:
        """The price per token that applies, and how it is known."""
        if not self.batch:
            return price_of(self.model_id), ""
        found = batch_price_of(self.model_id)
        if found is None:
            return None, ""
        return found[0], " at the batch price" if found[1] else " at the batch price (est. 50% of the live price)"

    def completion_per_call(self) -> tuple[int, str]:
        """(tokens, how they were estimated) for an uncached call."""
        if self.embeddings:
            return 0, "embeddings have none"
        if self.cached_completion:
            return round(sum(self.cached_completion) / len(self.cached_completion)), "mean of cached answers"
        if self.max_tokens:
            return self.max_tokens, "max_tokens, an upper bound"
        return FALLBACK_COMPLETION, "a guess"

    def completion_tokens(self) -> int:
        per_call, _ = self.completion_per_call()
        return sum(self.cached_completion) + per_call * (self.calls - self.cached)

    def cost(self) -> float | None:
        """The estimated cost of the uncached calls, None without a price."""
        price, _ = self.price()
        per_call, _ = self.completion_per_call()
        return None if price is None else price.cost(self.uncached_prompt_tokens, per_call * (self.calls - self.cached))


@dataclass
class CostEstimate:
    models: dict[str, ModelEstimate] = field(default_factory=dict)

    def add(self, name: str, model_id: str, prompt_text: str, cached: dict[str, Any] | None,
            max_tokens: int | None, batch: bool = False, embeddings: bool = False, local: bool = False) -> None:
        """Count one call (`embeddings`: an embeddings request)."""
        entry = self.models.setdefault(name, ModelEstimate(model_id, batch=batch, embeddings=embeddings, local=local))
        tokens = max(1, len(prompt_text) // CHARS_PER_TOKEN)
        entry.calls += 1
        entry.prompt_tokens += tokens
        entry.max_tokens = max_tokens
        if cached is not None:
            entry.cached += 1
            completion = (cached.get("usage") or {}).get("completion_tokens")
            if isinstance(completion, int):
                entry.cached_completion.append(completion)
        else:
            entry.uncached_prompt_tokens += tokens

    def totals(self) -> dict[str, int]:
        """The calls, cached calls and estimated prompt tokens of every model together."""
        return {name: sum(getattr(m, field) for m in self.models.values())
                for name, field in (("calls", "calls"), ("cached", "cached"), ("tokens", "prompt_tokens"))}

    def closing_lines(self) -> list[str]:
        """Per model, then the totals line (last, so scripts can read it)."""
        out = ["Estimate per model:"]
        for name, entry in self.models.items():
            per_call, how = entry.completion_per_call()
            uncached = entry.calls - entry.cached
            cost = entry.cost()
            if cost is None and entry.local:
                cost_text = "no price in litellm's table (a local model costs nothing)"
            elif cost is None:          # a hosted endpoint: it may well cost something
                cost_text = "unknown price (not in litellm's table; not counted in the est. cost)"
            else:
                cost_text = f"est. cost ${cost:.4f} for the {uncached} uncached call(s){entry.price()[1]}"
            basis = f" ({per_call} per uncached call: {how})" if uncached else ""
            out.append(f"  {name} ({entry.model_id}): {entry.calls} call(s), {entry.cached} cached, "
                       f"est. prompt tokens {entry.prompt_tokens}, est. completion tokens "
                       f"{entry.completion_tokens()}{basis}; {cost_text}")
        completion = sum(m.completion_tokens() for m in self.models.values())
        total = sum(cost for entry in self.models.values() if (cost := entry.cost()) is not None)
        unknown = [name for name, m in self.models.items() if not m.local and m.price()[0] is None]
        unpriced = f" (+ an unknown price for {', '.join(unknown)})" if unknown else ""
        totals = self.totals()
        return [*out, f"LLM calls: {totals['calls']} ({totals['cached']} cached), est. prompt tokens: "
                f"{totals['tokens']}, est. completion tokens: {completion}, est. cost: ${total:.4f}{unpriced}"]


@dataclass
class RenderSink:
    """Prompts are printed to `stream` (none: only counted); `estimate` adds them up."""

    stream: TextIO | None = None
    estimate: CostEstimate = field(default_factory=CostEstimate)     # what the calls add up to, per model
    hide: Callable[[str], str] = str       # the printed prompt's secrets hidden: the LLM service's (Runtime.llm)

    @property
    def stats(self) -> dict[str, int]:
        return self.estimate.totals()

    async def __call__(self, ask: Ask) -> Reply:
        raise NeedsModel(f"{ask.spec.name} has no cached answer")

    def record(self, made: Made) -> None:
        """Count one request and print it with where it goes and how it is asked."""
        ask, spec = made.ask, made.ask.spec
        if ask.request.embed:
            mode = "embeddings"
        elif ask.request.output_schema is None:
            mode = "none (no output schema)"
        else:     # the mode this endpoint uses now: the configured one, or what the fallback ladder learned
            mode = ask.mode + (f" (configured {spec.structured_output})" if spec.structured_output != ask.mode else "")
        prompt_text, sampling, cached = format_messages(ask.messages), ask.params, ask.cached
        self.estimate.add(spec.name, spec.model, prompt_text, cached, sampling.get("max_tokens"), spec.batch,
                          mode == "embeddings", local=spec.local)
        if self.stream is None:
            return
        params = ", ".join(f"{k}={v}" for k, v in sorted(sampling.items())) or "provider defaults"
        how = f"sampling: {params}; structured output: {mode}" if mode != "embeddings" else "the texts embedded:"
        self.stream.write(f"--- {'embeddings' if mode == 'embeddings' else 'LLM'} call: model {spec.name} "
                          f"({spec.model}) {'[cached]' if cached else '[not cached]'} ---\n"
                          f"endpoint: {redact(spec.endpoint)}; {how}\n"
                          f"{self.hide(prompt_text)}\n--- end ---\n")
