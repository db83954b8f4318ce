"""A 20-setting `runner sweep` over 200 cached citations (target: under 10 s).

Builds 200 citations from the labelled example (each claim numbered, so every prompt is
distinct), records the scripted jury's answers for context_lines 3 and 5 with
examples/citation_judge/labelled/record_answers.py, then times `runner sweep` over
quote_threshold (10 values) x context_lines (3, 5) as a fresh process (its cached pass
runs the settings in one worker process per CPU). Prints the table recorded in bench/RESULTS.md.

    python bench/calibration_sweep.py
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "citation_judge"
ITEMS = 200
THRESHOLDS = "0.5,0.55,0.6,0.65,0.7,0.75,0.8,0.85,0.9,0.95"


def recorder():
    spec = importlib.util.spec_from_file_location("record_answers", EXAMPLE / "labelled" / "record_answers.py")
    module = importlib.util.module_from_spec(spec)   # type: ignore[arg-type]
    spec.loader.exec_module(module)                  # type: ignore[union-attr]
    return module


def build(work: Path) -> int:
    """report200.md and labels200.jsonl: the labelled citations, numbered and repeated."""
    lines = [line for line in (work / "labelled" / "report.md").read_text().splitlines() if "](" in line]
    labels = [json.loads(line) for line in (work / "labelled" / "labels.jsonl").read_text().splitlines()]
    out, rows = ["# 200 citations", ""], []
    for n in range(ITEMS):
        out += [re.sub(r"^", f"Point {n + 1}: ", lines[n % len(lines)]), ""]
        rows.append(json.dumps({"index": n + 1, "verdict": labels[n % len(labels)]["verdict"]}))
    (work / "labelled" / "report200.md").write_text("\n".join(out))
    (work / "labelled" / "labels200.jsonl").write_text("\n".join(rows) + "\n")
    return len(lines)


def main() -> None:
    module = recorder()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "example"
        shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("cache", "reports"))
        base = build(work)
        cache = work / "labelled" / "cache200"
        started = time.perf_counter()
        calls = module.record(cache, work, "labelled/report200.md", lambda i: module.SCRIPT[(i - 1) % base + 1])
        recording = time.perf_counter() - started
        args = [str(REPO / "pipelines" / "citation_judge.yaml"), "--input", "labelled/report200.md",
                "--labels", "labelled/labels200.jsonl", "--key", "index", "--truth", "verdict",
                "--cache-dir", str(cache), "--set", "models.gemini.enabled=true",
                "--set", "models.openai.enabled=true", "--grid", f"params.quote_threshold={THRESHOLDS}",
                "--grid", "params.context_lines=3,5", "--out", "sweep"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "runner.cli.app", "sweep", *args], cwd=work, capture_output=True,
                              text=True)
        process = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        if done.returncode != 0:
            raise SystemExit(done.stderr)
        report = json.loads((work / "sweep" / "sweep.json").read_text())
        statuses = {s["status"] for s in report["settings"]}
        assert statuses == {"cached"}, statuses
    print(f"recorded {calls} answers in {recording:.1f} s")
    runs = len(report["settings"]) * ITEMS
    print("| sweep | settings | citations | item runs | wall time | CPU time (all processes) | load average |")
    print("|---|---|---|---|---|---|---|")
    print(f"| `runner sweep`, fresh process, all from the cache | {len(report['settings'])} | {ITEMS} | {runs} "
          f"| {process:.2f} s | {cpu:.2f} s | {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores |")
    print(f"\nbest: {report['best']['set_line']} (kappa {report['best']['kappa']})")


if __name__ == "__main__":
    main()
