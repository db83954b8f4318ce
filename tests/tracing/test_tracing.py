"""Tracing without a tracing backend: the observer hooks, the span tree, redaction, and
failures that never touch results. (MLflow itself: tests/tracing/test_mlflow_tracing.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest

from helpers import run, write_json
from runner.tracing.spans import Span, SpanRecorder

SECRET = "sk-tracing-secret-0123456789"


class Recorder(SpanRecorder):
    """Keeps what a backend would receive; fails on request."""

    backend = "test"

    def __init__(self, fail_on: int | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.exported: list[tuple[Span, dict[str, Any]]] = []
        self.fail_on = fail_on

    def export(self, root: Span, result: dict[str, Any]) -> dict[str, Any]:
        if self.fail_on is not None and len(self.exported) + 1 >= self.fail_on:
            raise ConnectionError(f"backend down (it saw {SECRET})")
        self.exported.append((root, result))
        return {"test_trace_id": f"t{result['index']}"}


class Recorders(list[Recorder]):
    fail_on: int | None = None


@pytest.fixture
def recorder(monkeypatch):
    """Every traced run gets a Recorder as its observer (they are kept in order)."""
    from runner.engine.context import add_warning
    from runner.engine.observe import NULL_OBSERVER
    made = Recorders()

    def make(runtime):
        if runtime.options.trace == "none":
            return NULL_OBSERVER
        made.append(Recorder(made.fail_on, redact=lambda text: text.replace(SECRET, "***"),
                             warn=lambda message: add_warning(runtime, message)))
        return made[-1]

    monkeypatch.setattr("runner.api.make_observer", make)
    return made


@pytest.fixture
def traced(project, scripted_llm, monkeypatch):
    monkeypatch.setenv("MY_API_KEY", SECRET)
    project.prompt("ask.j2", "Check {{ part }} of {{ item.text }} (key {{ env.MY_API_KEY }}).")
    path = project.pipeline("""
        version: 1
        name: traced
        env: [MY_API_KEY]
        models:
          m: {model: scripted/fake, retries: 0}
        steps:
          - id: parts
            uses: foreach
            with:
              items: "{{ ['a', 'b'] }}"
              as: part
              steps:
                - id: ask
                  uses: llm
                  with: {model: m, prompt: ask.j2}
          - id: broken
            uses: fail
            on_error: default
            default: recovered
            with: {message: "no good"}
          - id: skipped
            uses: compute
            if: "false"
            with: {x: 1}
        output:
          verdict: "{{ steps.parts[1].ask.raw }}"
        summary: {count_by: verdict}
        """)
    source = write_json(project.root / "items.json", [{"text": "one"}, {"text": "two"}])
    return lambda **options: run(path, source, **options)


def test_one_tree_per_item_with_steps_and_llm_calls(traced, recorder, scripted_llm):
    scripted_llm.script("VALID")
    outcome = traced()
    assert [r["test_trace_id"] for r in outcome.results] == ["t1", "t2"]          # fields a backend adds
    rec = recorder[-1]
    assert rec.traces == 2 and len(rec.exported) == 2
    root, result = sorted(rec.exported, key=lambda e: e[1]["index"])[0]
    assert (root.name, root.kind, root.inputs) == ("item 1", "item", {"text": "one"})
    assert root.outputs["verdict"] == "VALID" and result["verdict"] == "VALID"
    assert [c.name for c in root.children] == ["parts", "broken"]                 # a skipped step has no span
    parts, broken = root.children
    assert parts.attributes == {"uses": "foreach"} and parts.error is None
    assert [c.name for c in parts.children] == ["ask", "ask"]
    for ask in parts.children:
        (call,) = ask.children
        assert (call.name, call.kind, call.outputs) == ("llm:m", "llm", {"response": "VALID"})
        assert call.attributes["model_id"] == "scripted/fake" and call.attributes["cached"] is False
        assert call.attributes["attempts"] == 1 and call.attributes["usage"]["total_tokens"] > 0
        assert call.started_ns <= call.ended_ns
        assert ask.started_ns <= call.started_ns and call.ended_ns <= ask.ended_ns
    prompts = sorted(c.children[0].inputs["messages"][0]["content"] for c in parts.children)
    assert prompts == ["Check a of one (key ***).", "Check b of one (key ***)."]   # redacted before export
    assert (broken.error, broken.outputs) == ("no good", "recovered")
    assert root.started_ns <= parts.started_ns <= parts.ended_ns <= broken.started_ns <= root.ended_ns


def test_cached_calls_are_marked(traced, recorder, scripted_llm):
    scripted_llm.script("VALID")
    traced()
    traced()
    root = recorder[-1].exported[0][0]
    call = root.children[0].children[0].children[0]
    assert (call.attributes["cached"], call.attributes["attempts"]) == (True, 0)


def test_a_failing_backend_warns_once_and_changes_no_result(traced, recorder, scripted_llm):
    scripted_llm.script("VALID")
    plain = traced(trace="none")
    recorder.fail_on = 1
    outcome = traced()
    strip = [{k: v for k, v in r.items() if k != "test_trace_id"} for r in plain.results]
    assert outcome.results == strip                                                # unchanged, no trace field
    assert outcome.summary["run_warnings"] == [
        "tracing (test) is off for the rest of this run: backend down (it saw ***)"]
    assert recorder[-1].exported == [] and recorder[-1].failed


def test_tracing_off_without_a_tracking_uri_or_the_extra(project, scripted_llm, cli, monkeypatch):
    project.pipeline("""
        version: 1
        name: plain
        steps: [{id: c, uses: compute, with: {x: "{{ item.n * 2 }}"}}]
        output: {x: "{{ steps.c.x }}"}
        tracing: {backend: mlflow}
        """)
    write_json(project.root / "in.json", [{"n": 1}])
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    done = cli("run", "pipelines/p.yaml", "--input", "in.json", "--out", "out")
    assert done.exit_code == 0
    assert done.stderr.splitlines() == ["warning: tracing (mlflow) is off: set MLFLOW_TRACKING_URI "
                                        "(e.g. http://127.0.0.1:5000 for `mlflow ui --port 5000`)"]
    assert project.results() == [{"index": 1, "item_key": ANY, "x": 2}]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    monkeypatch.setattr("runner.tracing.importlib.util.find_spec", lambda name: None)
    done = cli("run", "pipelines/p.yaml", "--input", "in.json", "--out", "out")
    assert done.exit_code == 0 and project.results() == [{"index": 1, "item_key": ANY, "x": 2}]
    assert done.stderr == ("warning: tracing (mlflow) is off: the mlflow extra is not installed "
                           "(pip install 'runner[mlflow]')\n")
    quiet = cli("run", "pipelines/p.yaml", "--input", "in.json", "--out", "out", "--trace", "none")
    assert quiet.exit_code == 0 and quiet.stderr == ""
    bad = cli("run", "pipelines/p.yaml", "--input", "in.json", "--trace", "zipkin")
    assert bad.exit_code == 2 and bad.stderr == "--trace zipkin: choose from mlflow, none\n"


def test_tracing_fields_are_checked(project, cli):
    project.pipeline("""
        version: 1
        name: checked
        steps: [{id: c, uses: compute, with: {x: 1}}]
        output: {rating: "{{ steps.c.x }}", why: "{{ steps.c.x }}"}
        tracing:
          backend: mlflow
          experiment: "{{ params.nope }}"
          assessments: [rating, ratng]
          rationale: whyy
          colour: blue
        """)
    done = cli("validate", "pipelines/p.yaml")
    assert done.exit_code == 2
    assert done.stderr == ("pipelines/p.yaml:10:3: tracing.colour: unknown key 'colour' "
                           "(allowed: assessments, backend, experiment, rationale)\n")
    text = project.root / "pipelines" / "p.yaml"
    text.write_text(text.read_text().replace("  colour: blue\n", ""))
    done = cli("validate", "pipelines/p.yaml")
    assert done.exit_code == 2
    lines = done.stderr.splitlines()
    assert any("tracing.experiment: unknown param 'nope'" in line for line in lines)
    assert any("tracing.assessments[1]: unknown output field 'ratng'. Did you mean 'rating'?" in line
               for line in lines)
    assert any("tracing.rationale: unknown output field 'whyy'. Did you mean 'why'?" in line for line in lines)


def feedback_run(folder: Path) -> Path:
    """A run folder of two results, one traced to MLflow."""
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text(
        json.dumps({"index": 1, "item_key": "k1", "rating": "red", "trace_id": "t1", "mlflow_trace_id": "tr-1"}) + "\n"
        + json.dumps({"index": 2, "item_key": "k2", "rating": "green", "trace_id": "t2"}) + "\n")
    write_json(folder / "summary.json", {"pipeline": "p", "total": 2, "errors": 0, "count_by": "rating",
                                         "counts": {"red": 1, "green": 1}})
    return folder


def test_feedback_without_a_tracking_uri_is_kept_with_a_warning(project, cli, monkeypatch):
    feedback_run(project.root / "reports" / "p" / "in" / "r1")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    done = cli("feedback", "--store", "reports", "--trace-id", "tr-1", "--down", "--rationale", "no")
    assert done.exit_code == 0 and done.stdout == "feedback recorded for t1 (down)\n"
    assert done.stderr == "warning: not logged to MLflow: set MLFLOW_TRACKING_URI to the server that holds trace tr-1\n"
    plain = cli("feedback", "--store", "reports/p/in/r1", "--trace-id", "t2", "--up", "--user", "bob")
    assert plain.exit_code == 0 and plain.stderr == ""                      # never traced: nothing to say
    from runner.stores.reviews import ReviewStore
    store = ReviewStore(project.root / "reports" / "reviews.sqlite", create=False)
    reviews = list(store.of_pipeline("p"))
    store.close()
    assert [(r.item_key, r.agrees, r.judged, r.rationale, r.trace_id, r.run, r.item_index) for r in reviews] == [
        ("k1", False, "red", "no", "tr-1", "p/in/r1", 1), ("k2", True, "green", None, None, "p/in/r1", 2)]
    assert reviews[1].reviewer == "bob" and reviews[0].reviewer


def test_memo_hits_are_traced_and_marked(project, recorder):
    path = project.pipeline("""
        version: 1
        name: memoised
        memo: {key: "{{ item.text }}"}
        steps: [{id: s, uses: compute, with: {n: "{{ item.text | length }}"}}]
        output: {n: "{{ steps.s.n }}"}
        """)
    source = write_json(project.root / "items.json", [{"text": "one"}, {"text": "three"}])
    first = run(path, source)
    assert [r["test_trace_id"] for r in first.results] == ["t1", "t2"]
    again = run(path, source)
    assert all(r["memo_hit"] for r in again.results)
    assert recorder[-1].traces == 2                                 # one trace per item, memo hit or not
    roots = [root for root, _ in sorted(recorder[-1].exported, key=lambda e: e[1]["index"])]
    assert [(root.name, root.attributes, root.children) for root in roots] == [
        ("item 1", {"memo_hit": True}, []), ("item 2", {"memo_hit": True}, [])]
    assert [root.outputs["n"] for root in roots] == [3, 5]
    assert "memo_hit" not in recorder[0].exported[0][0].attributes   # a judged item is not marked
