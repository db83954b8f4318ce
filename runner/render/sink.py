"""`runner render`'s (and a sweep's cache pass's) transport and recorder for the LLM service: it
answers nothing (what the cache does not hold stops the item with NeedsModel), and records each
request the run makes, cached or not, as calls.jsonl would: printed with where it would go and
how it would be asked, counted, and estimated."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TextIO

from runner.errors import NeedsModel
from runner.llm.calls.record import format_messages
from runner.llm.request import Ask, Made, Reply
from runner.redact import redact
from runner.render.costs import CostEstimate


@dataclass
class RenderSink:
    """Prompts are printed to `stream` (none: only counted); `estimate` adds them up."""

    stream: TextIO | None = None
    estimate: CostEstimate = field(default_factory=CostEstimate)     # what the calls add up to, per model

    @property
    def stats(self) -> dict[str, int]:
        return {"calls": self.estimate.calls, "cached": self.estimate.cached, "tokens": self.estimate.prompt_tokens}

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
                          f"{prompt_text}\n--- end ---\n")
