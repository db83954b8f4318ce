"""Where `runner render` (and a sweep's cache probe) sends each LLM call instead of a model:
printed with where it would go and how it would be asked, counted, and estimated."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TextIO

from runner.llm.client.spec import ModelSpec
from runner.redact import redact
from runner.render.costs import CostEstimate


@dataclass
class RenderSink:
    """Prompts are printed to `stream` (none: only counted); `stats` and `estimate` add them up."""

    stream: TextIO | None
    stats: dict[str, int]
    estimate: CostEstimate = field(default_factory=CostEstimate)     # what the calls add up to, per model

    def call(self, spec: ModelSpec, prompt_text: str, cached: dict[str, Any] | None,
             sampling: dict[str, Any], mode: str) -> None:
        """Count one call and print it with where it goes and how it is asked."""
        tokens = self.estimate.add(spec.name, spec.model, prompt_text, cached, sampling.get("max_tokens"), spec.batch,
                                   mode == "embeddings", local=spec.local)
        self.stats["calls"] += 1
        self.stats["cached"] += int(cached is not None)
        self.stats["tokens"] += tokens
        if self.stream is None:
            return
        params = ", ".join(f"{k}={v}" for k, v in sorted(sampling.items())) or "provider defaults"
        how = f"sampling: {params}; structured output: {mode}" if mode != "embeddings" else "the texts embedded:"
        self.stream.write(f"--- {'embeddings' if mode == 'embeddings' else 'LLM'} call: model {spec.name} "
                          f"({spec.model}) {'[cached]' if cached else '[not cached]'} ---\n"
                          f"endpoint: {redact(spec.endpoint)}; {how}\n"
                          f"{prompt_text}\n--- end ---\n")
