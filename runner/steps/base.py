"""The step interface and the registry of step types.

A step type is a small class: its name, the schema of its `with:` (a file in
schemas/steps/), which `with:` keys name prompt files, models or schemas (so the loader
can check them statically), and one async `run`."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import NeedsModel as NeedsModel  # re-exported for step modules
from ..errors import RunnerError, did_you_mean
from ..errors import StepError as StepError  # re-exported for step modules

if TYPE_CHECKING:
    from ..engine import StepContext


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
    lazy_fields: tuple[str, ...] = ()
    own_scope: tuple[str, ...] = ()
    summary: str = ""


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

    async def run(self, ctx: StepContext) -> Any:
        raise NotImplementedError


STEP_TYPES: dict[str, type[Step]] = {}


def register(cls: type[Step]) -> type[Step]:
    STEP_TYPES[cls.name] = cls
    return cls


@cache
def step_schema(name: str) -> dict[str, Any]:
    from ..schema_check import read_schema
    return read_schema("steps", f"{name}.schema.json")


def step_info(name: str) -> StepInfo:
    cls = step_class(name)
    return StepInfo(name=cls.name, schema=step_schema(cls.name), template_fields=cls.template_fields,
                    model_fields=cls.model_fields, schema_fields=cls.schema_fields,
                    substeps=cls.substeps, sub_scope=cls.sub_scope, lazy_fields=cls.lazy_fields,
                    own_scope=cls.own_scope, summary=cls.summary)


def step_class(name: str) -> type[Step]:
    _load_builtin_steps()
    try:
        return STEP_TYPES[name]
    except KeyError:
        raise RunnerError(f"unknown step type '{name}'.{did_you_mean(name, STEP_TYPES)}") from None


def step_names() -> list[str]:
    _load_builtin_steps()
    return sorted(STEP_TYPES)


def _load_builtin_steps() -> None:
    from . import builtin  # noqa: F401  (registers every shipped step type)


@dataclass
class StepCatalog:
    """The view of step types the loader uses (keeps the loader free of step code)."""

    infos: dict[str, StepInfo] = field(default_factory=dict)

    @classmethod
    def builtin(cls) -> StepCatalog:
        return cls({name: step_info(name) for name in step_names()})
