"""One model's answer drawn several times (`repeat: N` on `llm` and `jury`), and the
confidence of the value it gives (`confidence: true`).

Each sample is its own request and cached answer (its index is part of the cache key). The
model's value is the strict leader among the samples that answered (a tie is no value, never
broken by order); `stability` is the share of them that give it. A sample's confidence is the
probability the model gave its value's tokens (runner/llm/logprobs.py); the model's is the mean
over the agreeing samples that carry one, None when the server sent no token probabilities."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from runner.engine.voting import comparable
from runner.errors import StepError
from runner.llm.logprobs import value_confidence

WHOLE_ANSWER = None        # a text answer's value is the whole answer


@dataclass
class Sample:
    """One answer of a model, or why it gave none."""

    value: Any = None
    answer: dict[str, Any] | None = None      # the service's result (output, raw, usage, ...)
    error: str | None = None
    confidence: float | None = None

    @property
    def valid(self) -> bool:
        return self.error is None


@dataclass
class Sampled:
    """A model's value over its samples."""

    value: Any = None
    chosen: Sample | None = None               # the first sample (by index) that gives the value
    error: str | None = None                   # no value: every sample failed, or they tie
    stability: float | None = None
    agreeing: int = 0                           # samples that give the value
    answered: int = 0                           # samples that gave any value
    confidence: float | None = None
    samples: list[Sample] = field(default_factory=list)

    @property
    def values(self) -> list[Any]:
        """Each sample's value, in sample order (None for a sample that gave none)."""
        return [s.value if s.valid else None for s in self.samples]

    @property
    def cached(self) -> bool:
        return all(bool((s.answer or {}).get("cached")) for s in self.samples)

    @property
    def latency_ms(self) -> int:
        return max((int((s.answer or {}).get("latency_ms") or 0) for s in self.samples), default=0)


def read_sample(answer: Any, field_name: str | None, confidence: bool) -> Sample:
    """A service answer (or its StepError) as a Sample of `field_name`'s value (the whole
    answer when None); the answer's token probabilities are read here and not kept."""
    if isinstance(answer, StepError):
        return Sample(error=answer.message, answer=answer.partial)
    if isinstance(answer, BaseException):
        raise answer
    tokens = answer.pop("logprobs", None)
    parsed = answer["output"]
    if field_name is WHOLE_ANSWER:
        value = parsed
    elif isinstance(parsed, dict) and field_name in parsed:
        value = parsed[field_name]
    else:
        return Sample(answer=answer, error=f"the answer has no '{field_name}' field")
    sure = value_confidence(answer.get("raw") or "", tokens, field_name, value) if confidence else None
    return Sample(value, answer, None, sure)


def combine(samples: list[Sample]) -> Sampled:
    """The value most samples give (a strict leader), its stability and confidence."""
    valid = [s for s in samples if s.valid]
    if not valid:
        first = next((s.error for s in samples if s.error), "no answer")
        count = len(samples)
        return Sampled(error=first if count == 1 else f"all {count} samples failed: {first}", samples=samples)
    counts = Counter(comparable(s.value) for s in valid)
    ranked = counts.most_common()
    top, top_count = ranked[0]
    if len(ranked) > 1 and ranked[1][1] == top_count:
        tied = ", ".join(f"{n} {k}" for k, n in sorted(ranked, key=lambda kn: str(kn[0])) if n == top_count)
        return Sampled(error=f"its {len(valid)} samples tie ({tied}): no value", samples=samples,
                       stability=round(top_count / len(valid), 4), answered=len(valid), agreeing=top_count)
    agreeing = [s for s in valid if comparable(s.value) == top]
    sure = [s.confidence for s in agreeing if s.confidence is not None]
    return Sampled(agreeing[0].value, agreeing[0], None, round(top_count / len(valid), 4), top_count, len(valid),
                   round(sum(sure) / len(sure), 4) if sure else None, samples)
