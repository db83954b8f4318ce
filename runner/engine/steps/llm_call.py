"""Shared by the `llm` and `jury` steps: build the messages and the call request."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runner.engine.context import Runtime, StepContext
from runner.engine.steps.base import Step
from runner.errors import InputError, StepError
from runner.fileio import parse_json, read_json
from runner.llm.client.spec import SAMPLING_KEYS
from runner.llm.service import CallRequest, new_group
from runner.paths import refusal, resolve_inside
from runner.pipeline.result_shapes import OPEN, TEXT, ShapeContext


def render_text(ctx: StepContext, value: str, field: str) -> str:
    """A prompt field: a file in prompts/ when it names one, else inline template text."""
    if value.endswith(".j2") and "\n" not in value:
        try:
            return ctx.runtime.renderer.file(value, ctx.scope)
        except Exception as exc:  # jinja errors, with the field that named the file
            from runner.pipeline.templating import describe_error
            problem = describe_error(exc, ctx.scope.get("steps"))
            raise StepError(f"{ctx.where(field)}: prompt '{value}': {problem}") from None
    return str(ctx.render(value, field))


def load_schema(ctx: StepContext, value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        if value.lstrip().startswith("{"):
            return _as_schema(ctx, lambda: parse_json(value, ctx.where("output_schema")))
        cache = ctx.runtime.resource(_answer_schemas)
        if value not in cache:
            folder = ctx.runtime.pipeline.schemas_dir
            path, status = resolve_inside(folder, value)
            if path is None:
                raise StepError(f"{ctx.where('output_schema')}: {refusal(status, value, folder, 'schemas')}")
            cache[value] = _as_schema(ctx, lambda: read_json(path))
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


@dataclass(frozen=True)
class PromptArgs:
    """What the `llm` and `jury` steps send (`prompt` and `system` stay raw: rendered here)."""

    prompt: str
    system: str | None = None
    output_schema: Any = None
    json: bool = False
    repair: Any = 0
    temperature: Any = None
    top_p: Any = None
    max_tokens: Any = None
    seed: Any = None
    sample: Any = 0


def build_requests(ctx: StepContext, models: list[str]) -> list[CallRequest]:
    """One request per model; the prompt is rendered once for all of them."""
    args = ctx.arguments(PromptArgs)
    messages: list[dict[str, Any]] = []
    if args.system:
        messages.append({"role": "system", "content": render_text(ctx, args.system, "system")})
    messages.append({"role": "user", "content": render_text(ctx, args.prompt, "prompt")})
    schema = load_schema(ctx, args.output_schema)
    sampling = {k: getattr(args, k, None) for k in SAMPLING_KEYS}
    group = new_group()      # the run fails outright when no model of the group answers
    return [CallRequest(model=model, messages=messages, item=ctx.item.index, step=ctx.spec.id, output_schema=schema,
                        as_json=bool(args.json) or schema is not None, repair=int(args.repair or 0),
                        sampling={k: v for k, v in sampling.items() if v is not None},
                        sample=int(args.sample or 0), group=group)
            for model in models]


class PromptedStep(Step):
    """What the loader checks for a step that sends a prompt template to models."""

    template_fields = ("prompt", "system")
    schema_fields = ("output_schema",)
    lazy_fields = ("prompt", "system")
    counts_calls = True


def answer_shape(args: Mapping[str, Any], shapes: ShapeContext) -> dict[str, Any]:
    """The parsed answer: checked against a literal output_schema, text without one."""
    if "output_schema" in args:
        return shapes.answer_schema(args["output_schema"]) or OPEN
    return OPEN if args.get("json") else TEXT
