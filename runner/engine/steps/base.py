"""The step interface: the base class of step types and their registration.

A step type is one module: a class with its name, which `with:` keys name prompt files,
models or schemas (so the loader can check them statically), the JSON Schema of its
result, and one async `run` reading a dataclass of its arguments; plus the schema of its
`with:` in runner/schemas/steps/<name>.schema.json."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, cast

from runner.checks.result_shapes import OPEN, ShapeContext
from runner.errors import StepError
from runner.pipeline.step_catalog import STEPS
from runner.yamlpos import Path as DataPath

if TYPE_CHECKING:
    from runner.engine.context import StepContext


class Step:
    """Base class of step types. Subclasses set the class variables and `run`."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    template_fields: ClassVar[tuple[str, ...]] = ()   # `with:` keys naming files in prompts/
    model_fields: ClassVar[tuple[str, ...]] = ()      # `with:` keys naming entries of models:
    schema_fields: ClassVar[tuple[str, ...]] = ()     # `with:` keys naming files in schemas/
    substeps: ClassVar[bool] = False                   # has `with.steps` of its own
    sub_scope: ClassVar[tuple[str, ...]] = ()          # names its sub-steps see (plus `with.as`)
    # `with:` keys the engine must not render before run(): the step renders them itself.
    lazy_fields: ClassVar[tuple[str, ...]] = ()
    render_args: ClassVar[bool] = True                 # False: run() renders all of `with:` itself
    own_scope: ClassVar[tuple[str, ...]] = ()          # extra names its own `with:` may read
    # Its result tells the LLM calls it (and its sub-steps) made: `calls` and `attempts` fields
    # of a mapping (declared in its result schema), or attributes of a list.
    counts_calls: ClassVar[bool] = False
    result: ClassVar[dict[str, Any]] = OPEN            # run()'s result (JSON Schema) when `with:` does not shape it
    # A plugin's `with:` schema (JSON Schema); a built-in's is runner/schemas/steps/<name>.schema.json.
    schema: ClassVar[dict[str, Any] | None] = None

    @classmethod
    def result_schema(cls, args: Mapping[str, Any], shapes: ShapeContext) -> dict[str, Any]:
        """The JSON Schema of run()'s result for this `with:` (open where it depends on the run)."""
        return cls.result

    @classmethod
    def static_problems(cls, args: Mapping[str, Any], shapes: ShapeContext) -> list[tuple[DataPath, str]]:
        """Problems in `with:` that need more than its schema: (path under `with`, message)."""
        return []

    async def run(self, ctx: StepContext) -> Any:
        raise NotImplementedError


def reaches(ctx: StepContext, value: float, threshold: Any) -> bool | None:
    """Whether `value` is at least the step's `threshold`; None without one."""
    if threshold is None:
        return None
    try:
        return value >= float(threshold)
    except (TypeError, ValueError):
        raise StepError(f"{ctx.where('threshold')}: {threshold!r} is not a number") from None


def as_text(value: Any) -> str:
    """A rendered value as the text a step compares (a missing value is the empty text)."""
    return "" if value is None else str(value)


def register(cls: type[Step]) -> type[Step]:
    STEPS.add(cls.name, cls)
    return cls


def step_class(name: str) -> type[Step]:
    return cast(type[Step], STEPS.get(name))     # every entry is registered by `register`
