"""The slide judge traced in a real MLflow: a tracking server on 127.0.0.1 with a sqlite
store, read back with MLflow's own client. Needs `pip install -e '.[mlflow,mlflow-server]'`."""

from __future__ import annotations

import getpass
import importlib.metadata
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers import copy_example, run, write_json

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("mlflow_server")]

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "pipelines" / "slide_judge.yaml"
EXAMPLE = REPO / "examples" / "slide_judge"
JUDGE = "ollama_chat/gpt-oss:20b"
SECRET = "sk-judge-secret-0123456789abcdef"


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


REQUIRED = bool(os.environ.get("RUNNER_REQUIRE_MLFLOW"))      # CI: run, never skip
needs_tracing = pytest.mark.skipif(
    not (REQUIRED or _installed("mlflow-tracing")),
    reason="the mlflow extra is not installed (pip install -e '.[mlflow]')")
needs_server = pytest.mark.skipif(
    not (REQUIRED or _installed("mlflow")),
    reason="the MLflow server is not installed (pip install -e '.[mlflow-server]')")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    url: str
    root: Path

    def client(self) -> Any:
        from mlflow import MlflowClient
        return MlflowClient(self.url)

    def stored_bytes(self) -> bytes:
        """Everything the server has written: its sqlite files and artifacts."""
        return b"".join(p.read_bytes() for p in sorted(self.root.rglob("*")) if p.is_file() and p.name != "server.log")


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    log = (root / "server.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
         "--default-artifact-root", str(root / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"},
        start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300        # the first start migrates the sqlite schema
        while True:
            if process.poll() is not None:
                pytest.fail(f"mlflow server exited: {(root / 'server.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"mlflow server did not start: {(root / 'server.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield Server(url, root)
    finally:
        os.killpg(process.pid, signal.SIGTERM)   # its own session: the server and its workers
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def verdict(rating: str, score: int, explanation: str, issues: tuple[dict[str, str], ...] = ()) -> str:
    return json.dumps({"rating": rating, "score": score, "explanation": explanation, "issues": list(issues)})


def runner_cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real command in its own process: what reaches stdout and stderr is what a user sees."""
    return subprocess.run([sys.executable, "-m", "runner.cli.app", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=600)


def spans_by_name(trace: Any) -> dict[str, Any]:
    return {span.name: span for span in trace.data.spans}


@needs_server
def test_slide_judge_traces_assessments_and_feedback(project, fake_llm, mlflow_server, monkeypatch, cli):
    example = project.root / "example"
    copy_example(EXAMPLE, example)
    fake_llm.script(verdict("red", 30, "West Q2 is 3.81M, not 3.9M",
                            ({"type": "wrong_value", "detail": "West Q2 3.9M vs 3810000"},)), contains="Regions")
    fake_llm.script(verdict("green", 95, "every number matches the source"))
    base = fake_llm.url.rsplit("/v1", 1)[0]
    out = project.root / "out"
    args = ("run", str(PIPELINE), "--input", "input.json", "--out", str(out), "--cache-dir", str(project.root / "c"),
            "--set", f"models.judge.api_base={base}", "--set", "tracing.experiment=slides-{{ run.pipeline }}",
            "--trace", "mlflow")
    done = runner_cli(*args, cwd=example, env={"MLFLOW_TRACKING_URI": mlflow_server.url})
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"5 item(s) (green: 4, red: 1); errors: 0; LLM calls: 5 sent, 0 cached; written to {out}\n"
    # nothing from MLflow (only runner's own lines: progress when the run takes over 5 s, the local-server note)
    assert [line for line in done.stderr.splitlines() if not line.startswith(("[runner] ", "runner: "))] == []

    results = project.results()
    client = mlflow_server.client()
    experiment = client.get_experiment_by_name("slides-slide_judge")
    traces = client.search_traces(locations=[experiment.experiment_id], max_results=100)
    assert sorted(t.info.trace_id for t in traces) == sorted(r["mlflow_trace_id"] for r in results)
    assert len(traces) == 5                                                       # one trace per slide
    summary = project.summary()
    assert summary["tracing"] == {
        "backend": "mlflow", "tracking_uri": mlflow_server.url, "experiment": "slides-slide_judge",
        "experiment_id": experiment.experiment_id, "traces": 5,
        "trace_url": f"{mlflow_server.url}/#/experiments/{experiment.experiment_id}/traces"
                     "?selectedEvaluationId={trace_id}"}

    for result in results:
        trace = client.get_trace(result["mlflow_trace_id"])
        spans = spans_by_name(trace)
        assert set(spans) == {f"item {result['index']}", "tables", "csv", "judge", "llm:judge", "scored", "verdict"}
        root = spans[f"item {result['index']}"]
        ids = {span.span_id: span.name for span in trace.data.spans}
        assert root.parent_id is None and root.span_type == "CHAIN"
        assert root.inputs["slide_index"] == result["slide_index"] and root.inputs["html"].startswith("<section")
        assert root.outputs["rating"] == result["rating"] and root.outputs["score"] == result["score"]
        assert ids[spans["csv"].parent_id] == "tables" and ids[spans["llm:judge"].parent_id] == "judge"
        assert {ids[spans[n].parent_id] for n in ("tables", "judge", "scored", "verdict")} == {root.name}
        assert spans["judge"].attributes["uses"] == "llm" and spans["judge"].outputs["output"]["rating"] == result["rating"]
        call = spans["llm:judge"]
        assert call.span_type == "CHAT_MODEL" and call.status.status_code.value == "OK"
        assert f"SLIDE {result['slide_index']} HTML" in call.inputs["messages"][0]["content"]
        assert json.loads(call.outputs["response"])["rating"] == result["rating"]
        assert (call.attributes["model"], call.attributes["model_id"], call.attributes["endpoint"]) == (
            "judge", JUDGE, base)
        assert (call.attributes["cached"], call.attributes["attempts"]) == (False, 1)
        assert call.attributes["usage"]["total_tokens"] > 0
        assessments = {a.name: a for a in trace.info.assessments}
        assert set(assessments) == {"rating", "score"}
        assert assessments["rating"].value == result["rating"] and assessments["score"].value == result["score"]
        for assessment in assessments.values():
            assert (assessment.source.source_type, assessment.source.source_id) == ("LLM_JUDGE", JUDGE)
            assert assessment.rationale == result["explanation"]

    report = (out / "report.md").read_text()
    red = next(r for r in results if r["rating"] == "red")
    link = (f"{mlflow_server.url}/#/experiments/{experiment.experiment_id}/traces"
            f"?selectedEvaluationId={red['mlflow_trace_id']}")
    assert f"[{red['mlflow_trace_id']}]({link})" in report
    assert f'<a href="{link}">{red["mlflow_trace_id"]}</a>' in (out / "report.html").read_text()

    # A human disagrees, by the result's own trace id; another agrees, by the MLflow one.
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.url)
    down = cli("feedback", "--store", str(out), "--trace-id", red["trace_id"], "--down",
               "--rationale", "West Q2 really is 3.9M: the CSV is stale", "--user", "alice")
    assert down.exit_code == 0, down.stderr
    assert down.stdout == f"feedback recorded for {red['trace_id']} (down) and to MLflow\n" and down.stderr == ""
    green = next(r for r in results if r["rating"] == "green")
    up = cli("feedback", "--store", str(out), "--trace-id", green["mlflow_trace_id"], "--up")
    assert up.exit_code == 0 and up.stderr == ""

    (human,) = [a for a in client.get_trace(red["mlflow_trace_id"]).info.assessments
                if a.source.source_type == "HUMAN"]
    assert (human.name, human.value, human.rationale, human.source.source_id) == (
        "human_feedback", False, "West Q2 really is 3.9M: the CSV is stale", "alice")
    (agrees,) = [a for a in client.get_trace(green["mlflow_trace_id"]).info.assessments
                 if a.source.source_type == "HUMAN"]
    assert (agrees.value, agrees.rationale, agrees.source.source_id) == (True, None, getpass.getuser())
    from runner.stores.reviews import ReviewStore
    store = ReviewStore(project.root / "reports" / "reviews.sqlite", create=False)
    reviews = {r.item_key: r for r in store.of_pipeline("slide_judge")}
    store.close()
    assert [(r.agrees, r.reviewer, r.trace_id) for r in (reviews[red["item_key"]], reviews[green["item_key"]])] == [
        (False, "alice", red["mlflow_trace_id"]), (True, getpass.getuser(), green["mlflow_trace_id"])]
    # A review in `runner view` is logged the same way (runner/tracing/feedback.py: record_review).
    from starlette.testclient import TestClient

    from runner.view.app import create_app as view_app
    view = TestClient(view_app(project.root, token="t"), base_url="http://127.0.0.1")
    seen = view.post("/api/review", json={"run": "out", "index": green["index"], "agrees": True, "reviewer": "bob"},
                     headers={"X-Runner-Token": "t"})
    assert seen.status_code == 200 and seen.json()["mlflow"] is True and "warning" not in seen.json(), seen.text
    assert "bob" in [a.source.source_id for a in client.get_trace(green["mlflow_trace_id"]).info.assessments]

    # Unchanged slides come from the memo: each gets a new trace marked as a memo hit (no
    # assessments: they live on the trace that judged it), and the stored trace ids stay.
    fake_llm.requests.clear()
    again = run(PIPELINE, example / "input.json", out=out, cache_dir=project.root / "c", trace="mlflow",
                overrides=[f"models.judge.api_base={base}", "tracing.experiment=slides-slide_judge"])
    assert fake_llm.requests == [] and all(r["memo_hit"] for r in again.results)
    assert [r["mlflow_trace_id"] for r in again.results] == [r["mlflow_trace_id"] for r in results]
    traces = client.search_traces(locations=[experiment.experiment_id], max_results=100)
    hits = [t for t in traces if t.info.tags.get("runner.memo_hit") == "true"]
    assert len(traces) == 10 and len(hits) == 5
    assert {t.info.tags["runner.memo_of_trace"] for t in hits} == {r["mlflow_trace_id"] for r in results}
    assert all(not t.info.assessments for t in hits)


@needs_server
def test_secrets_never_reach_mlflow(project, fake_llm, mlflow_server, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.url)
    monkeypatch.setenv("JUDGE_API_KEY", SECRET)
    deck = {"session_id": "s", "source_data": [{"query": "q", "columns": ["v"], "rows": [[1]]}],
            "slides": [{"slide_index": 0, "html": f"<p>debug token {SECRET}</p>"}]}
    fake_llm.script(verdict("amber", 60, f"the slide shows a key: {SECRET}"))
    base = fake_llm.url.rsplit("/v1", 1)[0]
    outcome = run(PIPELINE, write_json(project.root / "deck.json", deck), out=project.root / "out",
                  cache_dir=project.root / "c", trace="mlflow",
                  overrides=[f"models.judge.api_base={base}", "tracing.experiment=secrets"])
    (result,) = outcome.results
    trace = mlflow_server.client().get_trace(result["mlflow_trace_id"])
    spans = spans_by_name(trace)
    assert "<p>debug token ***</p>" in spans["llm:judge"].inputs["messages"][0]["content"]       # it was there
    assert {a.name: a.rationale for a in trace.info.assessments}["rating"] == "the slide shows a key: ***"
    assert SECRET.encode() not in mlflow_server.stored_bytes()


@needs_tracing
def test_feedback_is_kept_when_mlflow_is_down(project, cli, monkeypatch):
    from test_tracing import feedback_run

    from runner.stores.reviews import ReviewStore
    feedback_run(project.root / "reports" / "p" / "in" / "r1")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
    done = cli("feedback", "--store", "reports", "--trace-id", "tr-1", "--up", "--user", "bob")
    assert done.exit_code == 0 and done.stdout == "feedback recorded for t1 (up)\n"
    assert done.stderr.startswith(f"warning: not logged to MLflow at {os.environ['MLFLOW_TRACKING_URI']}: ")
    store = ReviewStore(project.root / "reports" / "reviews.sqlite", create=False)
    (review,) = store.of_pipeline("p")
    store.close()
    assert (review.item_key, review.reviewer, review.trace_id, review.agrees) == ("k1", "bob", "tr-1", True)


@needs_tracing
@pytest.mark.parametrize("uri", ["http://127.0.0.1:{port}", "nosuchscheme://nowhere"])
def test_an_unreachable_mlflow_never_fails_the_run(project, fake_llm, monkeypatch, cli, uri):
    deck = {"session_id": "s", "source_data": [{"query": "q", "columns": ["v"], "rows": [[1]]}],
            "slides": [{"slide_index": i, "html": f"<p>slide {i}</p>"} for i in range(3)]}
    fake_llm.script(verdict("green", 90, "fine"))
    base = fake_llm.url.rsplit("/v1", 1)[0]
    source = write_json(project.root / "deck.json", deck)
    cache = project.root / "c"
    run(PIPELINE, source, out=project.root / "plain", cache_dir=cache, overrides=[f"models.judge.api_base={base}"])
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri.format(port=free_port()))
    traced = cli("run", str(PIPELINE), "--input", str(source), "--out", "traced", "--cache-dir", str(cache),
                 "--no-cache", "--set", f"models.judge.api_base={base}", "--trace", "mlflow")
    assert traced.exit_code == 0
    assert traced.stdout == "3 item(s) (green: 3); errors: 0; LLM calls: 3 sent, 0 cached; written to traced\n"
    (warning,) = [line for line in traced.stderr.splitlines() if not line.startswith(("[runner] ", "runner: "))]
    assert warning.startswith("warning: tracing (mlflow) is off for the rest of this run: cannot reach MLflow at ")

    def stable(out: str) -> list[dict[str, Any]]:
        return [{k: v for k, v in r.items() if k not in ("duration_ms", "trace_id", "timestamp")}
                for r in project.results(out)]
    assert stable("traced") == stable("plain") and all("mlflow_trace_id" not in r for r in stable("traced"))
    assert project.summary("traced")["tracing"]["traces"] == 0
