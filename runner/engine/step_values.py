"""What a step reads as when it did not give a result of its own: skipped (its `if:` was
false), it reads as the empty value of its result shape with `skipped` true; failed into its
`default:`, it reads as that default laid over the empty value of its result. Either way a
later template reads the step's fields without a guard. The shapes are the ones `runner
validate` checks reads against (runner/checks/result_shapes.py), worked out once per step
and run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from runner.checks.result_shapes import ShapeContext, empty_value, laid_over, skipped_value, step_shape
from runner.engine.steps.base import step_class
from runner.pipeline.model import StepSpec

if TYPE_CHECKING:
    from runner.engine.context import Runtime


class _Shapes:
    """Each step's result shape (as declared, and with its on_error and default), by its place."""

    def __init__(self, runtime: Runtime):
        self.context = ShapeContext(runtime.pipeline.schemas_dir, self._substeps)
        self.known: dict[Any, tuple[dict[str, Any], dict[str, Any]]] = {}

    def _substeps(self, steps: list[Any]) -> dict[str, Any]:
        return {s["id"]: self._of(s["uses"], s.get("with") or {}, s.get("on_error"), s.get("default"))[1]
                for s in steps if isinstance(s, dict) and isinstance(s.get("id"), str) and "uses" in s}

    def _of(self, uses: str, args: Mapping[str, Any], on_error: Any, default: Any) -> tuple[dict[str, Any],
                                                                                         dict[str, Any]]:
        result_schema = step_class(uses).result_schema
        return result_schema(args, self.context), step_shape(result_schema, args, on_error, default, self.context)

    def of(self, spec: StepSpec) -> tuple[dict[str, Any], dict[str, Any]]:
        if spec.path not in self.known:
            self.known[spec.path] = self._of(spec.uses, spec.args, spec.on_error, spec.default)
        return self.known[spec.path]


def skipped(runtime: Runtime, spec: StepSpec) -> Any:
    """The value of a step whose `if:` was false."""
    return skipped_value(runtime.resource(_Shapes).of(spec)[1])


def defaulted(runtime: Runtime, spec: StepSpec, default: Any) -> Any:
    """The value of a step that failed into its rendered `default:`."""
    return laid_over(empty_value(runtime.resource(_Shapes).of(spec)[0]), default)
