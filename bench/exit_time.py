"""How long a `runner run` process takes to exit after printing its summary line: the
interpreter's own teardown (runner.cli.app.main returning normally) against the `runner`
command's entry(), which skips it once every file is written. 20 uncached calls to the
fake server.

    python bench/exit_time.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from fakellm import FakeLLM, Reply  # noqa: E402

ENTRIES = {"teardown (main() returns)": "from runner.cli.app import main; main()",
           "runner's entry() (os._exit)": "from runner.cli.app import entry; entry()"}


def after_summary(work: Path, code: str) -> float:
    process = subprocess.Popen([sys.executable, "-c", code, "run", "pipelines/p.yaml", "--input", "in.json",
                                "--out", "o", "--no-cache"], cwd=work, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    last = time.perf_counter()
    for _ in process.stdout:             # the summary line is the last thing printed
        last = time.perf_counter()
    process.wait()
    return time.perf_counter() - last


def main() -> None:
    server = FakeLLM().start()
    server.script(Reply('{"ok": true}'))
    print("| transport | exit | seconds after the summary line |\n|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "pipelines").mkdir()
        (work / "in.json").write_text(json.dumps([{"n": n} for n in range(20)]))
        for transport in ("litellm", "http"):
            (work / "pipelines" / "p.yaml").write_text(
                "version: 1\nname: e\n"
                f'models: {{m: {{model: openai/x, api_base: "{server.url}", transport: {transport}}}}}\n'
                'steps: [{id: a, uses: llm, with: {model: m, prompt: "hi {{ item.n }}", json: true}}]\n'
                'output: {ok: "{{ steps.a.output.ok }}"}\n')
            for name, code in ENTRIES.items():
                print(f"| {transport} | {name} | {after_summary(work, code):.3f} s |")
    server.stop()


if __name__ == "__main__":
    main()
