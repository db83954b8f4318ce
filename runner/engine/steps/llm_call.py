"""Shared by the `llm` and `jury` steps: build the messages and the call request; and one
model's answer drawn several times (`repeat: N`), with the confidence of the value it gives
(`confidence: true`).

Each sample is its own request and cached answer (its index is part of the cache key). The
model's value is the strict leader among the samples that answered (a tie is no value, never
broken by order); `stability` is the share of them that give it. A sample's confidence is the
probability the model gave its value's tokens (runner/llm/logprobs.py); the model's is the mean
over the agreeing samples that carry one, None when the server sent no token probabilities."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.checks.result_shapes import OPEN, TEXT, ShapeContext, fields_of
from runner.engine.context import Runtime, StepContext
from runner.engine.services import CallRequest, new_group
from runner.engine.steps.base import Step
from runner.engine.voting import comparable
from runner.errors import InputError, StepError, did_you_mean
from runner.fileio import parse_json, read_json
from runner.llm.client.spec import SAMPLING_KEYS
from runner.llm.logprobs import value_confidence
from runner.paths import refusal, resolve_inside
from runner.templating.sandbox import describe_error
from runner.yamlpos import Path as DataPath


def render_text(ctx: StepContext, value: str, field: str, scope: Mapping[str, Any] | None = None) -> str:
    """A prompt field: a file in prompts/ when it names one, else inline template text
    (in `scope`, by default the step's)."""
    scope = ctx.scope if scope is None else scope
    if value.endswith(".j2") and "\n" not in value:
        try:
            return ctx.runtime.renderer.file(value, scope)
        except Exception as exc:  # jinja errors, with the field that named the file
            problem = describe_error(exc, scope.get("steps"))
            raise StepError(f"{ctx.where(field)}: prompt '{value}': {problem}") from None
    return str(ctx.render(value, field, scope=scope))


def load_schema(ctx: StepContext, value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        if value.lstrip().startswith("{"):
            return _as_schema(ctx, lambda: parse_json(value, ctx.where("output_schema"), strict=True))
        cache = ctx.runtime.resource(_answer_schemas)
        if value not in cache:
            folder = ctx.runtime.pipeline.schemas_dir
            path, status = resolve_inside(folder, value)
            if path is None:
                raise StepError(f"{ctx.where('output_schema')}: {refusal(status, value, folder, 'schemas')}")
            cache[value] = _as_schema(ctx, lambda: read_json(path, strict=True))
        return cache[value]
    raise StepError(f"{ctx.where('output_schema')}: expected a schema file name or a schema object")


def _as_schema(ctx: StepContext, read: Callable[[], Any]) -> dict[str, Any]:
    """A schema read (a file or inline JSON), or StepError saying why it is not one."""
    try:
        schema = read()
    except InputError as exc:
        raise StepError(f"{ctx.where('output_schema')}: {exc}") from None
    if not isinstance(schema, dict):
        raise StepError(f"{ctx.where('output_schema')}: a schema is a JSON object, not {type(schema).__name__}")
    return schema


def _answer_schemas(runtime: Runtime) -> dict[str, Any]:
    return {}


STABILITY_FIELD = {"stability": {"type": ["number", "null"],
                                 "description": "With repeat: the share of the samples that give the value."}}
CONFIDENCE_FIELD = {"confidence": {"type": ["number", "null"],
                                   "description": "With confidence: true, the probability the model gave the "
                                                  "value's tokens; null when the server sent no token probabilities."}}


@dataclass(frozen=True)
class PromptArgs:
    """What the `llm` and `jury` steps send (`prompt` and `system` stay raw: rendered here)."""

    model: str = ""                     # the llm step's (a jury names `models`)
    field: str | None = None            # the answer field repeated samples vote on and `confidence` reads
    prompt: str | None = None
    system: str | None = None
    messages: list[dict[str, str]] | None = None
    output_schema: Any = None
    json: bool = False
    repair: Any = 0
    temperature: Any = None
    top_p: Any = None
    max_tokens: Any = None
    seed: Any = None
    sample: Any = 0
    repeat: Any = 1
    confidence: Any = False
    examples: Any = None


def example_turns(ctx: StepContext, prompt: str, examples: Any) -> list[dict[str, Any]]:
    """`examples:` (read by the loader: runner/pipeline/examples.py) as prior turns: each
    example's item rendered with the step's own prompt (`item` is the example's; every other
    name reads as for the item judged), then its answer as the assistant's."""
    turns: list[dict[str, Any]] = []
    for example in examples or []:
        turns.append({"role": "user", "content": render_text(ctx, prompt, "examples", {**ctx.scope,
                                                                                       "item": example["item"]})})
        answer = example["answer"]
        turns.append({"role": "assistant", "content": answer if isinstance(answer, str)
                      else json.dumps(answer, ensure_ascii=False)})
    return turns


def build_requests(ctx: StepContext, models: list[str]) -> list[list[CallRequest]]:
    """Per model, one request per sample (`repeat:`, default one); the prompt is rendered
    once for all of them."""
    args = ctx.arguments(PromptArgs)
    messages: list[dict[str, Any]] = []
    if args.system:
        messages.append({"role": "system", "content": render_text(ctx, args.system, "system")})
    for number, message in enumerate(args.messages or []):
        messages.append({"role": message["role"],
                         "content": render_text(ctx, message["content"], f"messages[{number}].content")})
    if args.prompt is not None:
        messages += example_turns(ctx, args.prompt, args.examples)
        messages.append({"role": "user", "content": render_text(ctx, args.prompt, "prompt")})
    schema = load_schema(ctx, args.output_schema)
    sampling = {k: getattr(args, k, None) for k in SAMPLING_KEYS}
    first, repeat = _whole(ctx, args.sample, "sample", 0), _whole(ctx, args.repeat, "repeat", 1)
    repair = _whole(ctx, args.repair, "repair", 0)
    group = new_group()      # the run fails outright when no model of the group answers
    return [[CallRequest(model=model, messages=messages, item=ctx.item.index, step=ctx.spec.id, output_schema=schema,
                         as_json=bool(args.json) or schema is not None, repair=repair,
                         sampling={k: v for k, v in sampling.items() if v is not None},
                         sample=first + n, group=group, logprobs=args.confidence is True)
             for n in range(repeat)]
            for model in models]


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
    if field_name is None:              # a text answer's value is the whole answer
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


async def sample(ctx: StepContext, requests: list[CallRequest], field: str | None) -> Sampled:
    """One model's samples, asked at once, and the value most of them give."""
    answers = await asyncio.gather(*(ctx.call(r) for r in requests), return_exceptions=True)
    return combine([read_sample(answer, field, ctx.args.get("confidence") is True) for answer in answers])


def sampling_fields(args: Mapping[str, Any], stability: float | None, values: list[Any] | None,
                    confidence: float | None) -> dict[str, Any]:
    """What `repeat:` (the stability and each sample's value) and `confidence:` add to an answer."""
    added: dict[str, Any] = {"stability": stability, "samples": values} if "repeat" in args else {}
    return {**added, "confidence": confidence} if "confidence" in args else added


def _whole(ctx: StepContext, value: Any, name: str, least: int) -> int:
    """A rendered count argument (`repeat`, `sample`, `repair`), at least `least`."""
    if value is None:
        return least
    text = str(value).strip()
    if isinstance(value, bool) or not text.lstrip("-").isdigit() or int(text) < least:
        raise StepError(f"{ctx.where(name)}: {text[:40]!r} is not a whole number of at least {least}")
    return int(text)


class PromptedStep(Step):
    """What the loader checks for a step that sends a prompt template to models."""

    template_fields = ("prompt", "system", "messages")     # messages: each one's content
    schema_fields = ("output_schema",)
    lazy_fields = ("prompt", "system", "messages", "examples")
    counts_calls = True


def repeat_problems(args: Mapping[str, Any]) -> list[tuple[DataPath, str]]:
    """`repeat:` samples drawn at temperature 0: one answer drawn N times."""
    repeat, temperature = args.get("repeat"), args.get("temperature")
    if isinstance(repeat, int) and repeat > 1 and isinstance(temperature, (int, float)) and temperature == 0:
        return [(("repeat",), f"{repeat} samples at temperature 0 are one answer drawn {repeat} times: set a "
                              "temperature above 0 on the step (e.g. temperature: 0.7)")]
    return []


def field_problems(args: Mapping[str, Any], shapes: ShapeContext) -> list[tuple[DataPath, str]]:
    """An `llm` step's `repeat:` or `confidence:` on a JSON answer with no `field:` for the
    samples to vote on and the confidence to read, or with one its answer schema lacks."""
    if "repeat" not in args and "confidence" not in args:
        return []
    field = args.get("field")
    json_answer = "output_schema" in args or args.get("json") is True
    if field is None:
        asked = "repeat" if "repeat" in args else "confidence"
        return [((asked,), "the answer is JSON: name the answer field the samples vote on and `confidence` "
                           "reads with `field:`")] if json_answer else []
    if not json_answer:
        return [(("field",), "a text answer has no fields: drop `field:` (the whole answer is the value), or ask "
                             "for JSON with output_schema")]
    known = fields_of(shapes.answer_schema(args.get("output_schema")))
    if known and field not in known:
        return [(("field",), not_a_property(field, known))]
    return []


def not_a_property(name: str, known: Collection[str], schema: str = "") -> str:
    """`name` is not a field of the answer schema (`schema`: which one): the nearest, or them all."""
    hint = did_you_mean(name, known)
    return (f"'{name}' is not a property of the answer schema{schema}"
            + (f".{hint}" if hint else f" (its properties: {', '.join(sorted(known))})"))


def answer_shape(args: Mapping[str, Any], shapes: ShapeContext) -> dict[str, Any]:
    """The parsed answer: checked against a literal output_schema, text without one."""
    if "output_schema" in args:
        return shapes.answer_schema(args["output_schema"]) or OPEN
    return OPEN if args.get("json") else TEXT
