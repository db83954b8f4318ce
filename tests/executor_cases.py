"""What every executor beyond `local` must do as a local run does, written once for
`--executor processes` (tests/engine/test_process_executor.py) and `--executor ray`
(tests/engine/test_ray_executor.py): each test passes the flags that choose its executor."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fakellm import Reply
from helpers import calls_of
from runner.engine.executors.driver import IN_FLIGHT_PER_WORKER


def untimed(value: Any) -> Any:
    """Without timings (latency_ms, duration_ms), which differ between any two runs."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k not in ("latency_ms", "duration_ms")}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def results_of(folder: Path) -> list[dict[str, Any]]:
    return [untimed(json.loads(line)) for line in (folder / "results.jsonl").read_text().splitlines()]


def summary_of(folder: Path) -> dict[str, Any]:
    summary = json.loads((folder / "summary.json").read_text())
    for key in ("duration_s", "started_at", "finished_at", "out_dir"):
        summary.pop(key, None)
    # An item whose three jurors all fail is grouped under the call that failed last, which
    # depends on timing in a local run too: the groups' sizes are compared.
    summary["error_groups"] = sorted(group["count"] for group in summary.get("error_groups", []))
    return untimed(summary)


def calls_in_order(folder: Path) -> list[dict[str, Any]]:
    """calls.jsonl without its timings, in item and call order (lines come as calls end)."""
    timings = ("started", "ended", "latency_ms")
    return sorted(({k: v for k, v in call.items() if k not in timings} for call in calls_of(folder)),
                  key=lambda call: (call["item"], call["call"]))


def report_of(folder: Path) -> str:
    """report.md without its timings and its folder's name."""
    text = (folder / "report.md").read_text().replace(str(folder.name), "FOLDER")
    return re.sub(r"\d+(\.\d+)? ?(ms|s)\b", "T", text)


def a_models_concurrency_holds_across_workers(project: Any, fake_llm: Any, cli: Any, executor: list[str]) -> None:
    """Two workers of four items each could send eight calls at once; the model allows two."""
    project.pipeline(f"""
        version: 1
        name: limited
        concurrency: 4
        models: {{m: {{model: openai/fake, api_base: "{fake_llm.url}", limits: {{concurrency: 2}}}}}}
        steps: [{{id: a, uses: llm, with: {{model: m, prompt: "Say {{{{ item.n }}}}"}}}}]
        output: {{answer: "{{{{ steps.a.raw }}}}"}}
        """)
    fake_llm.script(Reply("ok", delay=0.3))
    # The first call answers once a second is in flight beside it: that two go at once is then
    # not left to how fast a busy machine sends the second (peak 1 would pass a limit of 1).
    fake_llm.gather = 2
    (project.root / "in.json").write_text(json.dumps([{"n": n} for n in range(16)]))
    result = cli("run", "pipelines/p.yaml", "--input", "in.json", "--out", "out", *executor, "--workers", "2")
    assert result.exit_code == 0, result.output
    spans = [(r.started, r.finished) for r in fake_llm.requests]
    assert len(spans) == 16 and [r["answer"] for r in project.results("out")] == ["ok"] * 16
    assert max(sum(1 for start, end in spans if start <= moment < end) for moment, _ in spans) == 2


def slow_items(project: Any, fake_llm: Any, items: int, delay: float) -> Any:
    """A pipeline of one call an item, each answered after `delay` s, one item at a time a worker,
    and `items` items in in.json: the pipeline's path."""
    fake_llm.script(Reply("done", delay=delay))
    path = project.pipeline(f"""
        version: 1
        name: slow
        concurrency: 1
        models: {{m: {{model: openai/fake, api_base: "{fake_llm.url}"}}}}
        steps: [{{id: a, uses: llm, with: {{model: m, prompt: "Item {{{{ item.n }}}}"}}}}]
        output: {{answer: "{{{{ steps.a.raw }}}}"}}
        """)
    (project.root / "in.json").write_text(json.dumps([{"n": n} for n in range(items)]))
    return path


def ctrl_c_stops_the_workers_and_writes_what_finished(project: Any, fake_llm: Any, executor: list[str]) -> None:
    path = slow_items(project, fake_llm, 40, 0.3)
    process = subprocess.Popen(
        [sys.executable, "-m", "runner.cli.app", "run", str(path), "--input", "in.json", "--out", "out",
         *executor, "--workers", "2"],
        cwd=project.root, env={**os.environ, "RUNNER_CACHE_DIR": str(project.root / "cache")},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = project.root / "out" / "results.jsonl"
    deadline = time.monotonic() + 120
    while not (results.exists() and results.read_text().count("\n") >= 5) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    summary = json.loads((project.root / "out" / "summary.json").read_text())
    written = [json.loads(line) for line in results.read_text().splitlines()]
    assert summary["interrupted"] is True and summary["total"] == len(written) and 5 <= len(written) < 40
    assert all(r["answer"] == "done" for r in written)
    # The summary line, among stdout's lines: once, in CI's Ray stage (not reproduced in 9 runs since),
    # stdout did not start with it and the assertion did not show stdout; now a failure shows both streams.
    assert any(line.startswith(f"{len(written)} of 40 item(s), interrupted") for line in stdout.splitlines()), \
        (stdout, stderr)
    asked = len(fake_llm.requests)
    time.sleep(1.0)
    assert len(fake_llm.requests) == asked          # the workers stopped with the driver
    # A stopped block answers what it finished: only the items in flight are lost, one a running
    # block (2 workers; a Ray actor runs IN_FLIGHT_PER_WORKER blocks at once, a process one).
    assert asked - len(written) <= 2 * (IN_FLIGHT_PER_WORKER if "ray" in executor else 1), (asked, len(written))


def repeat_and_confidence_give_what_a_local_run_gives(project: Any, fake_llm: Any, cli: Any,
                                                      executor: list[str]) -> None:
    """`repeat:` and `confidence:` on an llm step and a jury: each sample is its own call in a
    worker, and the values, stabilities and confidences are the local run's."""
    from jurors import token_logprobs
    project.schema("v.schema.json", {"type": "object", "required": ["verdict"],
                                     "properties": {"verdict": {"enum": ["yes", "no"]}}})
    project.pipeline(f"""
        version: 1
        name: sampled
        models:
          a: {{model: openai/a, api_base: "{fake_llm.url}", temperature: 0.8, limits: {{concurrency: 8}}}}
          b: {{model: openai/b, api_base: "{fake_llm.url}", temperature: 0.8, limits: {{concurrency: 8}}}}
        steps:
          - {{id: one, uses: llm, with: {{model: a, prompt: "One {{{{ item.n }}}}", output_schema: v.schema.json,
                                        repeat: 3, field: verdict, confidence: true}}}}
          - {{id: jury, uses: jury, with: {{models: [a, b], prompt: "Both {{{{ item.n }}}}",
                                          output_schema: v.schema.json, vote: {{field: verdict}}, repeat: 3,
                                          confidence: true}}}}
        output: {{one: "{{{{ steps.one }}}}", jury: "{{{{ steps.jury }}}}"}}
        """)
    (project.root / "in.json").write_text(json.dumps([{"n": n} for n in range(6)]))

    def script() -> None:
        fake_llm.reset()
        yes, no = '{"verdict": "yes"}', '{"verdict": "no"}'
        for n in range(6):       # per item and model: two samples say yes, one no
            for model, sure in (("a", 0.7), ("b", 0.9)):
                for where in ("One", "Both"):
                    fake_llm.script(*(Reply(t, logprobs=token_logprobs(t, {"verdict": sure})) for t in (yes, no, yes)),
                                    model=model, contains=f"{where} {n}", repeat_last=False)

    runs = {}
    for name, flags in (("local", []), ("other", [*executor, "--workers", "2"])):
        script()
        result = cli("run", "pipelines/p.yaml", "--input", "in.json", "--out", name, "--no-cache", *flags)
        assert result.exit_code == 0, result.output
        assert len(fake_llm.requests) == 6 * 9
        runs[name] = [_samples_sorted(r) for r in results_of(project.root / name)]
    assert runs["other"] == runs["local"]
    first = runs["local"][0]
    assert (first["one"]["output"], first["one"]["stability"], first["one"]["confidence"]) == \
        ({"verdict": "yes"}, 0.6667, 0.7)
    assert (first["jury"]["verdict"], first["jury"]["stability"], first["jury"]["confidence"]) == ("yes", 0.6667, 0.8)


def _samples_sorted(value: Any) -> Any:
    """Samples in value order: which sample the fake answers first depends on arrival."""
    if isinstance(value, dict):
        return {k: sorted(v, key=str) if k == "samples" else _samples_sorted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_samples_sorted(v) for v in value]
    return value
