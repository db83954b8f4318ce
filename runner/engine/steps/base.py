"""The step interface and the registry of step types.

A step type is one module: a class with its name, which `with:` keys name prompt files,
models or schemas (so the loader can check them statically), the JSON Schema of its
result, and one async `run` reading a dataclass of its arguments; plus the schema of its
`with:` in runner/schemas/steps/<name>.schema.json."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar

from runner.errors import NeedsModel as NeedsModel  # noqa: F401  (old home of both)
from runner.errors import StepError as StepError  # noqa: F401
from runner.pipeline.result_shapes import OPEN, ShapeContext
from runner.registry import Registry
from runner.yamlpos import Path as DataPath

if TYPE_CHECKING:
    from runner.engine.context import StepContext


@dataclass(frozen=True)
class StepInfo:
    """What the loader may know about a step type without importing its logic."""

    name: str
    schema: dict[str, Any]
    template_fields: tuple[str, ...] = ()
    model_fields: tuple[str, ...] = ()
    schema_fields: tuple[str, ...] = ()
    substeps: bool = False
    sub_scope: tuple[str, ...] = ()
    own_scope: tuple[str, ...] = ()
    summary: str = ""
    result_schema: Callable[[Mapping[str, Any], ShapeContext], dict[str, Any]] = lambda args, shapes: OPEN
    static_problems: Callable[[Mapping[str, Any], ShapeContext], list[tuple[DataPath, str]]] = \
        lambda args, shapes: []


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
    result: ClassVar[dict[str, Any]] = OPEN            # run()'s result (JSON Schema) when `with:` does not shape it

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


# A step type is its module of runner/steps (a Step subclass decorated with @register) plus
# runner/schemas/steps/<name>.schema.json; a lookup by name imports that module first.
STEPS: Registry[type[Step]] = Registry("step type", "runner.engine.steps")


def register(cls: type[Step]) -> type[Step]:
    return STEPS.add(cls.name, cls)


@cache
def step_schema(name: str) -> dict[str, Any]:
    from runner.pipeline.schema_check import read_schema
    return read_schema("steps", f"{name}.schema.json")


def step_info(name: str) -> StepInfo:
    cls = step_class(name)
    return StepInfo(name=cls.name, schema=step_schema(cls.name), template_fields=cls.template_fields,
                    model_fields=cls.model_fields, schema_fields=cls.schema_fields,
                    substeps=cls.substeps, sub_scope=cls.sub_scope, own_scope=cls.own_scope, summary=cls.summary,
                    result_schema=cls.result_schema, static_problems=cls.static_problems)


def step_class(name: str) -> type[Step]:
    return STEPS.get(name)


def step_names() -> list[str]:
    return STEPS.names()


class StepCatalog:
    """The view of step types the loader uses (keeps the loader free of step code). The
    built-in one reads every step type on first use: a run of a pipeline already found
    valid never uses it, and imports only the step types the pipeline names."""

    def __init__(self, infos: dict[str, StepInfo] | None = None):
        self._infos = infos

    @property
    def infos(self) -> dict[str, StepInfo]:
        if self._infos is None:
            self._infos = {name: step_info(name) for name in step_names()}
        return self._infos

    @classmethod
    def builtin(cls) -> StepCatalog:
        return cls()
