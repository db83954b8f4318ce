"""Peak memory and time of big runs: the citation judge over generated reports of 10,000,
100,000 and 1,000,000 citations with every juror seat off (steps 1-2: read the lines, match
the quote), and 20,000 citations x 3 jurors against the fake server (tests/fakellm.py),
cold and then fully cached. Each row also counts the files the run folder holds and the
lines of its calls.jsonl: one file for every call, however many items (`--jury-size
1000000` checks it for a cached million-item run).

Each run is a fresh `runner run` process; its peak RSS is the kernel's accounting of that
child (wait4), its time the wall clock around it. `--no-reports` runs the same with the
report builders (report.md, report.html) replaced by stubs, to show what they cost.

    python bench/big_runs.py                       # the table recorded in bench/RESULTS.md
    python bench/big_runs.py --sizes 20000 100000  # chosen sizes, jurors off
    python bench/big_runs.py --generate 100000 DIR # only write DIR/report.md and DIR/data/
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "citation_judge"
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from installed_env import INSTALLED_ENV  # noqa: E402

from fakellm import FakeLLM, Reply  # noqa: E402

ANSWER = json.dumps({"verdict": "VALID", "substantive_quote": True, "quote_in_context": True,
                     "supports_claim": True, "reason": "scripted"})
JURORS = (("local", "local-model"), ("gemini", "gemini-fake"), ("openai", "gpt-fake"))
# The same run with the report builders stubbed out (what the rest of the run costs alone).
NO_REPORTS = ("import sys, runner.api as api\n"
              "api.build_view = lambda *a, **k: None\n"
              "api.render_report = api.render_html = lambda view: ''\n"
              "from runner.cli.app import entry\nsys.argv[0] = 'runner'\nentry()\n")


def generate(count: int, folder: Path, unique: bool = False) -> Path:
    """A report of `count` citations, cycling the example's citation sentences (10 a paragraph);
    `unique` numbers each sentence ("Point 12: ..."), so that no two prompts are the same."""
    sentences = [line for line in (EXAMPLE / "report.md").read_text(encoding="utf-8").splitlines()
                 if "](data/" in line]
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(EXAMPLE / "data", folder / "data", dirs_exist_ok=True)
    path = folder / "report.md"
    with path.open("w", encoding="utf-8") as out:
        out.write("# A long report\n\n")
        for number, sentence in zip(range(count), itertools.cycle(sentences), strict=False):
            out.write((f"Point {number + 1}: " if unique else "") + sentence + "\n")
            if number % 10 == 9:
                out.write("\n")
    return path


def run(folder: Path, jurors_url: str | None, reports: bool = True) -> dict[str, float]:
    """One `runner run` over folder/report.md: its wall seconds and peak RSS (MB)."""
    head = [sys.executable, "-m", "runner.cli.app"] if reports else [sys.executable, "-c", NO_REPORTS]
    args = [*head, "run", str(REPO / "pipelines" / "citation_judge.yaml"), "--input", "report.md",
            "--out", "out", "--quiet", "--cache-dir", str(folder / "cache")]
    if jurors_url is None:
        args += ["--set", "models.local.enabled=false"]
    else:
        for seat, model in JURORS:
            args += ["--set", f"models.{seat}.model=openai/{model}", "--set", f"models.{seat}.api_base={jurors_url}",
                     "--set", f"models.{seat}.enabled=true", "--set", f"models.{seat}.limits.concurrency=16"]
        args += ["--set", "concurrency=16"]
    shutil.rmtree(folder / "out", ignore_errors=True)
    started = time.perf_counter()
    child = subprocess.Popen(args, cwd=folder, env=INSTALLED_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert child.stderr is not None
    errors = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"exit {child.returncode}: {errors.decode()[-2000:]}")
    out = folder / "out"
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    files = sum(1 for path in out.rglob("*") if path.is_file())
    calls = 0
    if (out / "calls.jsonl").is_file():
        with (out / "calls.jsonl").open("rb") as lines:
            calls = sum(chunk.count(b"\n") for chunk in iter(lambda: lines.read(1 << 20), b""))
    return {"seconds": elapsed, "peak_mb": usage.ru_maxrss / 1024, "total": summary["total"], "files": files,
            "calls": calls}


def row(label: str, figures: dict[str, float]) -> str:
    return (f"| {label} | {figures['total']:,.0f} | {figures['seconds']:.1f} s | {figures['peak_mb']:.0f} MB | "
            f"{figures['files']:.0f} | {figures['calls']:,.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 20_000, 100_000, 1_000_000])
    parser.add_argument("--jury-size", type=int, nargs="*", default=[20_000], help="items of the 3-juror runs")
    parser.add_argument("--no-reports", action="store_true", help="also run each size with the reports stubbed")
    parser.add_argument("--reports-up-to", type=int, default=100_000,
                        help="larger sizes run with the reports stubbed only (they hold every item)")
    parser.add_argument("--generate", nargs=2, metavar=("COUNT", "DIR"), help="only write a report and its data")
    options = parser.parse_args()
    if options.generate:
        print(generate(int(options.generate[0]), Path(options.generate[1])))
        return
    print("| run | items | wall time | peak RSS | files in the run folder | calls.jsonl lines |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="runner-big-") as tmp:
        for size in options.sizes:
            folder = generate(size, Path(tmp) / str(size)).parent
            variants = [True, False] if options.no_reports else [True]
            if size > options.reports_up_to:
                variants = [False]
            for reports in variants:
                print(row("jurors off" + ("" if reports else ", reports stubbed"), run(folder, None, reports)),
                      flush=True)
            shutil.rmtree(folder)
        for jury_size in options.jury_size:
            server = FakeLLM().start()
            server.script(Reply(ANSWER))
            try:
                folder = generate(jury_size, Path(tmp) / f"jury{jury_size}", unique=True).parent
                for reports in [True, False] if options.no_reports else [True]:
                    shutil.rmtree(folder / "cache", ignore_errors=True)      # every call sent
                    stubbed = "" if reports else ", reports stubbed"
                    print(row(f"3 jurors, fake server{stubbed}", run(folder, server.url, reports)), flush=True)
                    print(row(f"3 jurors, cached rerun{stubbed}", run(folder, server.url, reports)), flush=True)
            finally:
                server.stop()
                shutil.rmtree(folder)


if __name__ == "__main__":
    main()
