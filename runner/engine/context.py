"""What a step sees: the run's options and shared services (Runtime), its own context
(StepContext), rendering that names the failing field, and the run's warnings. Never imports
the engine: the engine hands each context the way to run sub-steps."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

import jinja2

from runner.engine.observe import NULL_OBSERVER, ItemsInFlight, Observer
from runner.engine.services import LLM
from runner.errors import RunnerError, StepError, TemplateError
from runner.fileio import now
from runner.inputs import Item, namespace_scope
from runner.pipeline.model import Pipeline, StepSpec
from runner.redact import redact
from runner.runs.request import RunOptions
from runner.templating.sandbox import Renderer, describe_error
from runner.yamlpos import Path as DataPath

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from runner.engine.executors.limits import SharedLimits
    from runner.llm.cache.store import JsonCache
    from runner.llm.client.spec import ModelSpec
    from runner.llm.request import CallRequest
    from runner.llm.shared_client import SharedClient
    from runner.render.sink import RenderSink
    from runner.stores.memo import MemoStore

T = TypeVar("T")
A = TypeVar("A", bound="DataclassInstance")


class _NotGiven:
    def __repr__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN: Any = _NotGiven()      # the default of an argument whose absence means something

# What runs each item in place of the engine's run_item (which it calls itself).
ItemRunner = Callable[["Runtime", Item], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class RunRole:
    """Who makes a run and where what it computes goes, beside the user's RunOptions (default: a
    command's run in its run folder). The last three live in this process: such a run is local."""

    # run.json's `kind`: run, or probe (whose results carry each juror's verdict, never from the memo store)
    kind: str = "run"
    worker: bool = False          # a processes or Ray worker: its calls go back to the driver with its results
    shared_llm: SharedClient | None = None     # `runner serve`'s long-lived LLM client, used and left open
    # serve's jobs: each item through the results store; it returns run_item's result as it is, or a
    # result that keeps its notes (kept.VOTES_FIELD: the recorder measures the jurors over them)
    item_runner: ItemRunner | None = None
    # `runner render`, a sweep's cache-only settings: the transport and recorder that answers nothing
    preview: RenderSink | None = None


@dataclass
class Runtime:
    """Services shared by every item of one run."""

    pipeline: Pipeline
    options: RunOptions
    renderer: Renderer
    env: dict[str, str]
    params: dict[str, Any]
    run_info: dict[str, Any]
    role: RunRole = field(default_factory=RunRole)
    # Extra sections of summary.json, each computed from the runtime when the run ends.
    summary_sections: dict[str, Callable[[Runtime], Any]] = field(default_factory=dict)
    _resources: dict[Callable[..., Any], Any] = field(default_factory=dict)
    memo: MemoStore | None = None
    # results a model's answer made, taken from elsewhere: the memo, serve's store, a job's run before
    # a restart (outputs/summary.ErrorCount.add), a --failed-from rerun's parent (results_file.merge_parent)
    reused_answered: int = 0
    closers: list[Callable[[], None]] = field(default_factory=list)      # per-run resources to close at the end
    observer: Observer = NULL_OBSERVER                     # tracing hooks (runner/engine/observe.py)
    open_caches: dict[str, JsonCache] = field(default_factory=dict)   # opened before the run, by folder name
    in_flight: ItemsInFlight = field(default_factory=ItemsInFlight)   # items running now (run_items counts)
    shared_limits: SharedLimits | None = None          # a worker's: model limits held for every worker of the run
    _llm: LLM | None = None

    @classmethod
    def create(cls, pipeline: Pipeline, options: RunOptions, role: RunRole | None = None) -> Runtime:
        if pipeline.plugins:        # every process of a run imports them (a worker starts without)
            from runner.pipeline.step_catalog import load_plugins
            load_plugins(pipeline.plugins)
        env = declared_env(pipeline)
        run_info = {"pipeline": pipeline.name, "input": options.input_path, "started_at": now()}
        runtime = cls(pipeline, options, Renderer(pipeline.prompts_dir), env, pipeline.params, run_info,
                      role or RunRole())
        # a run's own memo store; a preview of a run (`runner render`, no folder of its own) reads
        # the one the run would (its group's), so that it shows the calls the run would send
        previewed = runtime.role.preview is not None and options.out_dir is None
        folder = options.memo_dir if previewed else options.out_dir and (options.memo_dir or options.out_dir)
        if pipeline.memo and runtime.role.kind != "probe" and folder is not None:
            from runner.stores.memo import MemoStore, store_path
            store = runtime.renderer.value(pipeline.memo.store, {"params": pipeline.params, "env": env})
            path = store_path(folder, store)
            runtime.memo = MemoStore.reading(path) if previewed else MemoStore(path)
            if previewed and runtime.memo is not None:      # a run closes its own in write_outputs
                runtime.closers.append(runtime.memo.close)
        return runtime

    def resource(self, make: Callable[[Runtime], T]) -> T:
        """One per-run object per factory (a step type's cache), made on first use."""
        if make not in self._resources:
            self._resources[make] = make(self)
        return cast(T, self._resources[make])

    @functools.cached_property
    def made_by(self) -> str:
        """What makes this runtime's results (kept results are keyed by it): the resolved
        pipeline, params included, its prompt and schema files, and its models as they resolve."""
        from runner.runs.manifest import made_by_hash
        return made_by_hash(self.pipeline, self.model_spec)

    @property
    def llm_used(self) -> bool:
        return self._llm is not None

    @property
    def llm(self) -> LLM:
        """The LLM service, created on first use (it never imports litellm until a cache miss)."""
        if self._llm is None:
            from runner.llm.service import LLMService
            shared, preview = self.role.shared_llm, self.role.preview
            service = LLMService(self.model_spec, self.options, self.env, observer=self.observer,
                                 in_flight=self.in_flight, shared=shared,
                                 cache=None if shared is not None else self.open_caches.pop("responses", None),
                                 kept_calls=self.role.worker, transport=preview, recorder=preview)
            service.sender.cluster_limits = self.shared_limits
            if preview is not None:     # it prints what calls.jsonl would hold: the secrets hidden alike
                preview.hide = service.hide_secrets
            self._llm = service
        return self._llm

    def model_spec(self, name: str) -> ModelSpec:
        """The rendered, checked spec of the model `name` under models:."""
        from runner.llm.client.routing import registered_transports
        from runner.llm.client.spec import build_spec
        entry = self.pipeline.models.get(name)
        if entry is None:
            raise RunnerError(f"unknown model '{name}'")
        scope = {"env": self.env, "params": self.params, "run": self.run_info}
        rendered = render_at(self, entry, ("models", name), scope)      # its error names its place already
        try:
            return build_spec(name, rendered, registered_transports())
        except RunnerError as exc:
            raise RunnerError(f"{self.pipeline.where(('models', name))}: {exc}") from None

    def base_scope(self, item: Item) -> dict[str, Any]:
        scope: dict[str, Any] = {"item": item.value, "params": self.params, "env": self.env,
                                 "run": self.run_info, "steps": {}}
        parent_as = self.pipeline.input.parent_as
        if parent_as:
            scope[parent_as] = item.parent
        namespaces = self.pipeline.input.namespaces
        if namespaces:
            scope.update(namespace_scope(item.value, namespaces))     # InputError: the item fails
        return scope

    async def aclose(self) -> None:
        for close in self.closers:
            close()
        for cache in self.open_caches.values():      # caches the run never used
            cache.close()
        self.open_caches.clear()
        if self._llm is not None:
            await self._llm.aclose()
        await self.observer.aclose()


def _warnings(runtime: Runtime) -> list[str]:
    return []


def add_warning(runtime: Runtime, message: str) -> None:
    """A run-level warning: said once per run, kept in summary.json (`run_warnings`) and shown
    by the CLI and the report."""
    message = redact(message)
    warnings = runtime.resource(_warnings)
    if message not in warnings:
        warnings.append(message)


def run_warnings(runtime: Runtime) -> list[str]:
    return list(runtime.resource(_warnings))


def declared_env(pipeline: Pipeline) -> dict[str, str]:
    """The environment variables the pipeline declares that are set."""
    return {name: os.environ[name] for name in pipeline.env_names if name in os.environ}


@functools.cache
def _argument_keys(kind: type) -> tuple[tuple[str, str], ...]:
    """(field name, `with:` key) of an argument dataclass, read once per class."""
    return tuple((f.name, f.name.rstrip("_")) for f in dataclasses.fields(kind))


@dataclass
class CallCounts:
    """The LLM calls a step made and the attempts they took, counted by the engine: each call
    counts in its step and in every step around it (a loop, a foreach, a part)."""

    calls: int = 0
    attempts: int = 0
    parent: CallCounts | None = None

    def add(self, answer: Mapping[str, Any]) -> None:
        """One call's outcome (an answer, or what a failed call left): its requests and attempts."""
        counts: CallCounts | None = self
        while counts is not None:
            counts.calls += int(answer.get("calls", 1))
            counts.attempts += int(answer.get("attempts", 0))
            counts = counts.parent


@dataclass
class StepContext:
    """What a step's run() sees."""

    runtime: Runtime
    spec: StepSpec
    args: dict[str, Any]
    scope: dict[str, Any]
    item: Item
    substeps: Callable[[tuple[StepSpec, ...], dict[str, Any], CallCounts], Awaitable[StepsOutcome]]
    stop_requested: bool = False
    counts: CallCounts = field(default_factory=CallCounts)

    def arguments(self, kind: type[A]) -> A:
        """This step's `with:` (rendered, but for the step's lazy fields) as the dataclass
        `kind`: a field per key, `as_` for `as`; keys not given keep the field's default."""
        return kind(**{name: self.args[key] for name, key in _argument_keys(kind) if key in self.args})

    def render(self, value: Any, *field_path: str | int, scope: Mapping[str, Any] | None = None) -> Any:
        """Render a raw (lazy) value of this step's `with:`, errors naming the field."""
        return render_at(self.runtime, value, (*self.spec.path, "with", *field_path), scope or self.scope)

    def condition(self, value: Any, *field_path: str | int, scope: Mapping[str, Any] | None = None) -> bool:
        return condition_at(self.runtime, value, (*self.spec.path, "with", *field_path), scope or self.scope)

    def where(self, *field_path: str | int) -> str:
        return self.runtime.pipeline.where((*self.spec.path, "with", *field_path))

    async def run_steps(self, specs: tuple[StepSpec, ...], scope: dict[str, Any]) -> StepsOutcome:
        """Run sub-steps (foreach, loop, a part) in `scope`, through the engine that made this
        context; their LLM calls count in this step too."""
        return await self.substeps(specs, scope, self.counts)

    async def call(self, request: CallRequest) -> dict[str, Any]:
        """One LLM call through the run's service, counted in this step (failed ones too)."""
        try:
            answer = await self.runtime.llm.call(request)
        except StepError as exc:
            self.counts.add(exc.partial or {})
            raise
        self.counts.add(answer)
        return answer


# What evaluating a template can raise: Jinja's errors and those of the Python it runs.
TEMPLATE_FAILURES = (jinja2.TemplateError, TypeError, ValueError, ArithmeticError, KeyError)


def render_at(runtime: Runtime, value: Any, path: DataPath, scope: Mapping[str, Any]) -> Any:
    """Render a templated value; a failure is a TemplateError naming the file, line and field."""
    return _at(runtime, runtime.renderer.value, value, path, scope)


def condition_at(runtime: Runtime, expression: Any, path: DataPath, scope: Mapping[str, Any]) -> bool:
    """Evaluate an `if:`/`when:`-style condition, failing like render_at."""
    return _at(runtime, runtime.renderer.condition, expression, path, scope)


def _at(runtime: Runtime, evaluate: Callable[[Any, Mapping[str, Any]], T], value: Any, path: DataPath,
        scope: Mapping[str, Any]) -> T:
    try:
        return evaluate(value, scope)
    except TEMPLATE_FAILURES as exc:
        raise TemplateError(f"{runtime.pipeline.where(path)}: {describe_error(exc, scope.get('steps'))}") from None


@dataclass
class StepsOutcome:
    results: dict[str, Any]
    stopped: bool = False
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
