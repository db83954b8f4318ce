"""Runs items through steps: `if`, `on_error`, stop, concurrency, outputs."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2

from .errors import RunnerError, TemplateError
from .inputs import Item
from .pipeline import Pipeline, StepSpec
from .steps.base import NeedsModel, Step, StepError, step_class
from .templating import Renderer, describe_error
from .yamlpos import Path as DataPath


@dataclass
class RunOptions:
    cache_dir: Path = Path("cache")
    no_cache: bool = False
    llm_concurrency: int = 8
    out_dir: Path | None = None
    render: bool = False           # `runner render`: print prompts, send nothing
    input_path: str | None = None


@dataclass
class Runtime:
    """Services shared by every item of one run."""

    pipeline: Pipeline
    options: RunOptions
    renderer: Renderer
    env: dict[str, str]
    params: dict[str, Any]
    run_info: dict[str, Any]
    shared: dict[str, Any] = field(default_factory=dict)   # per-run caches keyed by their owner
    memo: Any = None
    closers: list[Any] = field(default_factory=list)      # per-run resources to close at the end
    _llm: Any = None

    @classmethod
    def create(cls, pipeline: Pipeline, options: RunOptions) -> Runtime:
        env = {name: os.environ[name] for name in pipeline.env_names if name in os.environ}
        run_info = {"pipeline": pipeline.name, "input": options.input_path,
                    "started_at": datetime.now(UTC).isoformat(timespec="seconds")}
        runtime = cls(pipeline, options, Renderer(pipeline.prompts_dir), env, pipeline.params, run_info)
        if pipeline.memo and options.out_dir is not None:
            from .memo import MemoStore, store_path
            store = runtime.renderer.value(pipeline.memo.get("store"), {"params": pipeline.params, "env": env})
            runtime.memo = MemoStore(store_path(options.out_dir, store))
        return runtime

    @property
    def llm_used(self) -> bool:
        return self._llm is not None

    @property
    def llm(self) -> Any:
        """The LLM service, created on first use (it never imports litellm until a cache miss)."""
        if self._llm is None:
            from .llm.service import LLMService, RenderSink
            sink = None
            if self.options.render:
                sink = RenderSink(self.shared.get("render.stream"),
                                  self.shared.setdefault("render.stats", {"calls": 0, "cached": 0, "tokens": 0}))
            self._llm = LLMService(self.model_spec, self.options, self.env, render=sink)
        return self._llm

    def model_spec(self, name: str) -> Any:
        """The rendered, checked spec of the model `name` under models:."""
        from .llm.spec import build_spec
        entry = self.pipeline.models.get(name)
        if entry is None:
            raise RunnerError(f"unknown model '{name}'")
        scope = {"env": self.env, "params": self.params, "run": self.run_info}
        try:
            return build_spec(name, render_at(self, entry, ("models", name), scope))
        except RunnerError as exc:
            raise RunnerError(f"{self.pipeline.where(('models', name))}: {exc}") from None

    def base_scope(self, item: Item) -> dict[str, Any]:
        scope: dict[str, Any] = {"item": item.value, "params": self.params, "env": self.env,
                                 "run": self.run_info, "steps": {}}
        parent_as = self.pipeline.input.get("parent_as")
        if parent_as:
            scope[parent_as] = item.parent
        return scope

    async def aclose(self) -> None:
        for close in self.closers:
            close()
        if self._llm is not None:
            await self._llm.aclose()


@dataclass
class StepContext:
    """What a step's run() sees."""

    runtime: Runtime
    spec: StepSpec
    args: dict[str, Any]
    scope: dict[str, Any]
    item: Item
    stop_requested: bool = False

    def render(self, value: Any, *field_path: str | int, scope: Mapping[str, Any] | None = None) -> Any:
        """Render a raw (lazy) value of this step's `with:`, errors naming the field."""
        return render_at(self.runtime, value, (*self.spec.path, "with", *field_path), scope or self.scope)

    def condition(self, value: Any, *field_path: str | int, scope: Mapping[str, Any] | None = None) -> bool:
        return condition_at(self.runtime, value, (*self.spec.path, "with", *field_path), scope or self.scope)

    def where(self, *field_path: str | int) -> str:
        return self.runtime.pipeline.where((*self.spec.path, "with", *field_path))

    async def run_steps(self, specs: tuple[StepSpec, ...], scope: dict[str, Any]) -> StepsOutcome:
        return await run_steps(self.runtime, specs, scope, self.item)


# What evaluating a template can raise: Jinja's errors and those of the Python it runs.
TEMPLATE_FAILURES = (jinja2.TemplateError, TypeError, ValueError, ArithmeticError, KeyError)


def render_at(runtime: Runtime, value: Any, path: DataPath, scope: Mapping[str, Any]) -> Any:
    """Render a templated value; a failure is a TemplateError naming the file, line and field."""
    try:
        return runtime.renderer.value(value, scope)
    except TEMPLATE_FAILURES as exc:
        raise TemplateError(f"{runtime.pipeline.where(path)}: {describe_error(exc)}") from None


def condition_at(runtime: Runtime, expression: Any, path: DataPath, scope: Mapping[str, Any]) -> bool:
    """Evaluate an `if:`/`when:`-style condition, failing like render_at."""
    try:
        return runtime.renderer.condition(expression, scope)
    except TEMPLATE_FAILURES as exc:
        raise TemplateError(f"{runtime.pipeline.where(path)}: {describe_error(exc)}") from None


@dataclass
class StepsOutcome:
    results: dict[str, Any]
    stopped: bool = False
    error: str | None = None
    warnings: list[str] = field(default_factory=list)


_INSTANCES: dict[str, Step] = {}


def _instance(uses: str) -> Step:
    if uses not in _INSTANCES:
        _INSTANCES[uses] = step_class(uses)()
    return _INSTANCES[uses]


async def run_steps(runtime: Runtime, specs: tuple[StepSpec, ...], scope: dict[str, Any], item: Item) -> StepsOutcome:
    """Run `specs` in order in `scope` (whose `steps` dict they fill)."""
    results: dict[str, Any] = scope["steps"]
    for spec in specs:  # a step that does not run (skipped, or after a stop or failure) is null
        results.setdefault(spec.id, None)
    outcome = StepsOutcome(results)
    for spec in specs:
        try:
            if spec.condition is not None and not condition_at(runtime, spec.condition, (*spec.path, "if"), scope):
                results[spec.id] = None
                continue
        except TemplateError as exc:
            outcome.error = str(exc)
            return outcome
        ctx: StepContext | None = None
        try:
            step = _instance(spec.uses)
            lazy = set(step.lazy_fields) | ({"steps"} if step.substeps else set())
            args = {k: (v if k in lazy or not step.render_args
                        else render_at(runtime, v, (*spec.path, "with", k), scope))
                    for k, v in spec.args.items()}
            ctx = StepContext(runtime, spec, args, scope, item)
            results[spec.id] = await step.run(ctx)
        except NeedsModel:
            raise
        except (StepError, TemplateError) as exc:
            message = exc.message if isinstance(exc, StepError) else str(exc)
            partial = exc.partial if isinstance(exc, StepError) else None
            if spec.on_error == "fail":
                results[spec.id] = partial
                outcome.error = f"step '{spec.id}': {message}"
                return outcome
            outcome.warnings.append(f"step '{spec.id}': {message}")
            if spec.on_error == "continue":
                results[spec.id] = {**(partial or {}), "error": message}
            else:
                try:
                    results[spec.id] = render_at(runtime, spec.default, (*spec.path, "default"),
                                                 {**scope, "error": message})
                except TemplateError as again:
                    outcome.error = str(again)
                    return outcome
        if ctx is not None and ctx.stop_requested:
            outcome.stopped = True
            return outcome
    return outcome


async def run_item(runtime: Runtime, item: Item) -> dict[str, Any]:
    """One item's result: its output fields, `index`, and `error` when there is one."""
    result: dict[str, Any] = {"index": item.index}
    if item.error:
        result["error"] = item.error
        return result
    scope = runtime.base_scope(item)
    memo_key = None
    if runtime.memo is not None and runtime.pipeline.memo is not None:
        try:
            memo_key = str(render_at(runtime, runtime.pipeline.memo["key"], ("memo", "key"), scope))
            stored = runtime.memo.get(memo_key)
            if stored is not None:
                return _from_memo(runtime, stored, scope, result)
        except TemplateError as exc:
            return {**result, "error": str(exc)}
    started = time.perf_counter()
    try:
        outcome = await run_steps(runtime, runtime.pipeline.steps, scope, item)
    except NeedsModel:
        raise
    except RunnerError as exc:
        outcome = StepsOutcome(scope["steps"], error=str(exc))
    except Exception as exc:  # a bug in one step must not sink the other items
        outcome = StepsOutcome(scope["steps"], error=f"internal error: {type(exc).__name__}: {exc}")
    scope["duration_ms"] = round((time.perf_counter() - started) * 1000)
    if runtime.pipeline.output_base:
        try:
            base = render_at(runtime, runtime.pipeline.output_base, ("output_base",), scope)
            if isinstance(base, dict):
                result.update({k: v for k, v in base.items() if k != "index"})
        except TemplateError as exc:
            outcome.error = outcome.error or str(exc)
    for name, template in runtime.pipeline.output.items():
        try:
            result[name] = render_at(runtime, template, ("output", name), scope)
        except TemplateError as exc:
            result[name] = None
            if not outcome.error:
                outcome.error = str(exc)
    if outcome.error:
        # A failed item keeps what it could compute; fields that came out empty are dropped.
        result = {k: v for k, v in result.items() if v is not None}
        result["error"] = outcome.error
    elif result.get("error") is None:
        result.pop("error", None)      # `error` is present only when there is one
    warnings = [*(result.get("warnings") or []), *outcome.warnings]
    result.pop("warnings", None)
    if warnings:
        result["warnings"] = warnings
    if memo_key is not None and not outcome.error:
        _remember(runtime, memo_key, result, scope)
    return result


def _remember(runtime: Runtime, key: str, result: dict[str, Any], scope: dict[str, Any]) -> None:
    """Store a finished result unless `memo.skip_when` says not to (a broken condition stores nothing)."""
    skip = (runtime.pipeline.memo or {}).get("skip_when")
    try:
        if skip and condition_at(runtime, skip, ("memo", "skip_when"), {**scope, "result": result}):
            return
    except TemplateError as exc:
        result.setdefault("warnings", []).append(f"{exc}; result not stored")
        return
    runtime.memo.put(key, result)


def _from_memo(runtime: Runtime, stored: dict[str, Any], scope: dict[str, Any],
               result: dict[str, Any]) -> dict[str, Any]:
    """A stored result, with the fields listed in `memo.refresh` rendered for this item."""
    result.update(stored)
    for name in (runtime.pipeline.memo or {}).get("refresh") or []:
        result[name] = render_at(runtime, runtime.pipeline.output[name], ("output", name), scope)
    result["memo_hit"] = True
    return result


async def run_items(runtime: Runtime, items: list[Item], concurrency: int,
                    on_result: Callable[[dict[str, Any]], Awaitable[None] | None]) -> list[dict[str, Any]]:
    """Run every item, at most `concurrency` at once; results come back in input order."""
    gate = asyncio.Semaphore(max(1, concurrency))
    results: dict[int, dict[str, Any]] = {}

    async def one(item: Item) -> None:
        async with gate:
            result = await run_item(runtime, item)
        results[item.index] = result
        maybe = on_result(result)
        if maybe is not None:
            await maybe

    tasks = [asyncio.ensure_future(one(item)) for item in items]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
    return [results[i.index] for i in items if i.index in results]
