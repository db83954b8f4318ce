"""Tracing: `--trace mlflow` or a pipeline's `tracing: {backend: mlflow, ...}` makes the run's
observer (runner/engine/observe.py) one that traces items, steps and LLM calls (`spans`) into
MLflow (`mlflow_backend`); and `runner feedback` (`feedback`: a review by trace id).

Chooses the run's observer. Nothing here imports a tracing SDK: the backend does, in its
own thread, when the first item ends."""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import TYPE_CHECKING

from runner.engine.observe import NULL_OBSERVER, Observer
from runner.errors import InputError
from runner.redact import hide_secrets, named_secrets, remember_url

if TYPE_CHECKING:
    from runner.engine.context import Runtime

BACKENDS = ("mlflow", "none")


def check_trace(trace: str | None) -> None:
    """--trace names a backend, or InputError before anything runs."""
    if trace is not None and trace not in BACKENDS:
        raise InputError(f"--trace {trace}: choose from {', '.join(BACKENDS)}")


def make_observer(runtime: Runtime) -> Observer:
    pipeline = runtime.pipeline
    config = pipeline.tracing or {}
    backend = str(runtime.options.trace or config.get("backend") or "none")
    if backend == "none":
        return NULL_OBSERVER
    from runner.engine.context import add_warning, render_at
    from runner.tracing.mlflow_backend import INSTALL_HINT, URI_VAR, MlflowTracer

    warn = functools.partial(add_warning, runtime)

    def redact(text: str) -> str:
        """What calls.jsonl hides, without starting an LLM service: a trace holds prompts and
        answers, which lose known secrets by value only (runner.redact.hide_secrets)."""
        if runtime.llm_used:
            return str(runtime.llm.hide_secrets(text))
        return hide_secrets(text, secrets=named_secrets(runtime.env))

    uri = runtime.env.get(URI_VAR) or os.environ.get(URI_VAR)
    remember_url(uri or "")
    if not uri:
        warn(f"tracing ({backend}) is off: set {URI_VAR} (e.g. http://127.0.0.1:5000 for `mlflow ui --port 5000`)")
        return NULL_OBSERVER
    if importlib.util.find_spec("mlflow") is None:
        warn(f"tracing ({backend}) is off: the mlflow extra is not installed ({INSTALL_HINT})")
        return NULL_OBSERVER
    scope = {"params": runtime.params, "env": runtime.env, "run": runtime.run_info}
    experiment = str(render_at(runtime, config.get("experiment") or pipeline.name, ("tracing", "experiment"), scope))
    count_by = pipeline.summary.count_by      # the assessments: `tracing.assessments`, else the verdict
    fields = list(config["assessments"]) if config.get("assessments") is not None else [count_by] if count_by else []
    tracer = MlflowTracer(uri, experiment, fields, config.get("rationale"), pipeline.name, redact=redact, warn=warn)
    runtime.summary_sections["tracing"] = lambda _runtime: tracer.section()
    return tracer
