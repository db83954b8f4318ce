"""MLflow: one trace per item, verdict fields as assessments, human feedback.

Needs the `mlflow` extra (the mlflow-tracing SDK). mlflow is imported here only, the
first time a trace or a feedback is logged; nothing else in runner imports it."""

from __future__ import annotations

import json
import logging
import os
from typing import Any
from urllib.parse import urlsplit

from runner.redact import strip_credentials
from runner.tracing.spans import Span, SpanRecorder, TracingFailed

INSTALL_HINT = "pip install 'runner[mlflow]'"
URI_VAR = "MLFLOW_TRACKING_URI"
# Our own thread logs each trace; failures must be seen at once, and a dead server must
# not hold a run for minutes (MLflow's defaults: 7 retries, 120 s timeouts).
_DEFAULTS = {"MLFLOW_ENABLE_ASYNC_TRACE_LOGGING": "false", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
             "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
             "MLFLOW_DISABLE_TELEMETRY": "true"}
SPAN_TYPES = {"item": "CHAIN", "step": "CHAIN", "llm": "CHAT_MODEL"}


class _Capture(logging.Handler):
    """Keeps MLflow's warnings off the terminal, counted, with the last one's message (a warning
    during an export means it failed); nothing else of a record is kept, in a server's long life."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count, self.last = 0, ""

    def emit(self, record: logging.LogRecord) -> None:
        self.count, self.last = self.count + 1, record.getMessage()


_capture = _Capture()


def import_mlflow(tracking_uri: str) -> Any:
    for name, value in _DEFAULTS.items():
        os.environ.setdefault(name, value)
    try:
        import mlflow
    except ImportError:
        raise TracingFailed(f"the mlflow extra is not installed ({INSTALL_HINT})") from None
    for name in ("mlflow", "opentelemetry", "alembic"):
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.addHandler(_capture)
        logger.propagate = False
    mlflow.set_tracking_uri(tracking_uri)
    return mlflow


class MlflowTracer(SpanRecorder):
    backend = "mlflow"

    def __init__(self, tracking_uri: str, experiment: str, assessments: list[str], rationale: str | None,
                 pipeline: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.assessments = assessments
        self.rationale = rationale
        self.pipeline = pipeline
        self.experiment_id: str | None = None
        self._mlflow: Any = None

    def setup(self) -> None:
        self._mlflow = import_mlflow(self.tracking_uri)
        try:
            self.experiment_id = self._mlflow.set_experiment(self.experiment).experiment_id
        except Exception as exc:
            raise TracingFailed(f"cannot reach MLflow at {strip_credentials(self.tracking_uri)}: {exc}") from None

    def export(self, root: Span, result: dict[str, Any]) -> dict[str, Any]:
        memo_hit = root.attributes.get("memo_hit")
        tags = {"runner.pipeline.model": self.pipeline, "runner.item": root.name}
        if memo_hit:
            tags["runner.memo_hit"] = "true"
            if result.get("mlflow_trace_id"):
                tags["runner.memo_of_trace"] = str(result["mlflow_trace_id"])
        seen = _capture.count
        live = self._mlflow.start_span_no_context(
            root.name, span_type=SPAN_TYPES["item"], inputs=root.inputs, experiment_id=self.experiment_id,
            start_time_ns=root.started_ns, tags=tags)
        trace_id = live.trace_id
        for child in root.children:
            self._span(child, live)
        live.end(outputs=root.outputs, status=self._status(root), end_time_ns=root.ended_ns)
        if _capture.count > seen:
            raise TracingFailed(_capture.last)
        if not memo_hit:      # a reused result's assessments live on its first trace
            self._assess(trace_id, root, result)
        return {"mlflow_trace_id": trace_id}

    def _span(self, span: Span, parent: Any) -> None:
        attributes = dict(span.attributes)
        usage = attributes.get("usage") or {}
        if span.kind == "llm" and usage:
            attributes["mlflow.chat.tokenUsage"] = {
                "input_tokens": usage.get("prompt_tokens", 0), "output_tokens": usage.get("completion_tokens", 0),
                "total_tokens": usage.get("total_tokens", 0)}
        live = self._mlflow.start_span_no_context(
            span.name, span_type=SPAN_TYPES[span.kind], parent_span=parent, inputs=span.inputs,
            attributes=attributes, start_time_ns=span.started_ns)
        for child in span.children:
            self._span(child, live)
        live.end(outputs=span.outputs, status=self._status(span), end_time_ns=span.ended_ns or span.started_ns)

    def _status(self, span: Span) -> Any:
        from mlflow.entities import SpanStatus, SpanStatusCode
        return SpanStatus(SpanStatusCode.ERROR, span.error) if span.error else SpanStatus(SpanStatusCode.OK)

    def _assess(self, trace_id: str, root: Span, result: dict[str, Any]) -> None:
        from mlflow.entities import AssessmentSource
        judges = sorted({s.attributes["model_id"] for s in root.walk() if s.kind == "llm" and not s.error})
        source = (AssessmentSource(source_type="LLM_JUDGE", source_id=", ".join(judges)) if judges
                  else AssessmentSource(source_type="CODE", source_id=f"runner:{self.pipeline}"))
        rationale = result.get(self.rationale) if self.rationale else None
        for name in self.assessments:
            if result.get(name) is None:
                continue
            value = result[name] if isinstance(result[name], (str, int, float, bool)) \
                else json.dumps(result[name], ensure_ascii=False, default=str)
            self._mlflow.log_feedback(trace_id=trace_id, name=name, value=value,
                                      source=source, rationale=None if rationale is None else str(rationale))

    def section(self) -> dict[str, Any]:
        """summary.json's `tracing`: where the traces went."""
        uri = strip_credentials(self.tracking_uri)
        out: dict[str, Any] = {"backend": self.backend, "tracking_uri": uri, "experiment": self.experiment,
                               "experiment_id": self.experiment_id, "traces": self.traces}
        if self.experiment_id and urlsplit(self.tracking_uri).scheme in ("http", "https"):   # the MLflow UI
            out["trace_url"] = (f"{uri.rstrip('/')}/#/experiments/{self.experiment_id}"
                                "/traces?selectedEvaluationId={trace_id}")
        return out


def log_human_feedback(tracking_uri: str, trace_id: str, name: str, value: bool, rationale: str | None,
                       user: str) -> str:
    """Log one human assessment on a trace; its assessment id."""
    mlflow = import_mlflow(tracking_uri)
    from mlflow.entities import AssessmentSource
    assessment = mlflow.log_feedback(trace_id=trace_id, name=name, value=value, rationale=rationale,
                                     source=AssessmentSource(source_type="HUMAN", source_id=user))
    return str(assessment.assessment_id)
