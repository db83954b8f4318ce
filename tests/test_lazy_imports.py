"""What running, rendering and validating never import, checked in fresh interpreters.

- litellm and aiohttp: imported when a call is sent; a cached run, a render (its cost read
  from litellm's price table as data) and validate send none.
- jsonschema: the checks are for pipelines not yet seen (runner/pipeline/validated.py); a
  cached run and a render of a pipeline found valid skip them, and answers read from the
  cache are not validated again.
- The web stack (starlette, uvicorn, FastAPI, psycopg, python-multipart): `runner view` and
  `runner serve` only; not even their `--help`, nor a run that sends calls or checks a pipeline.
- mlflow: only with tracing on (`--trace mlflow`), never because a pipeline names an
  experiment, whether its calls are sent or cached (.ci/run runs this module again with
  mlflow installed).
- scikit-learn, scipy, numpy: the statistics of `runner eval`, `sweep` and `align` only.

Each fresh interpreter runs several commands in turn (each as `runner` would, its exit code
checked) and then says which of the modules it was not to import it holds: one interpreter
start for all of them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any
from unittest.mock import ANY

from runner.pipeline.validated import FOLDER

REPO = Path(__file__).resolve().parent.parent
CALLS = ("litellm", "aiohttp")
CHECKS = ("jsonschema", "referencing")
WEB = ("starlette", "uvicorn", "fastapi", "psycopg", "multipart", "python_multipart")
TRACING = ("mlflow",)
STATISTICS = ("sklearn", "scipy", "numpy")

COMMANDS = textwrap.dedent("""
    import json, sys
    from runner.cli.app import main
    commands, modules = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    codes = []
    for args in commands:
        sys.argv = ["runner", *args]
        try:
            main()
            codes.append(0)
        except SystemExit as done:
            codes.append(done.code or 0)
    print(json.dumps({"codes": codes, "imported": sorted(name for name in modules if name in sys.modules)}))
    """)


def fresh_interpreter(project: Any, commands: list[list[str]], modules: tuple[str, ...]) -> dict[str, Any]:
    """Exit codes of `commands` run one after the other, and which of `modules` they imported."""
    done = subprocess.run([sys.executable, "-c", COMMANDS, json.dumps(commands), json.dumps(modules)],
                          cwd=project.root, env=dict(os.environ, RUNNER_CACHE_DIR=str(project.root / "cache")),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_runs_renders_validate_and_help_import_none_of_what_they_do_not_use(project, fake_llm, cli):
    fake_llm.answer_json({"verdict": "yes"})
    project.prompt("ask.j2", "Question {{ item.q }}\n")
    project.schema("answer.schema.json", {"type": "object", "properties": {"verdict": {"type": "string"}}})
    path = str(project.pipeline(f"""
        version: 1
        name: v
        models:
          m: {{model: openai/m, api_base: "{fake_llm.url}"}}
        steps:
          - id: ask
            uses: llm
            with: {{model: m, prompt: ask.j2, output_schema: answer.schema.json}}
        output:
          verdict: "{{{{ steps.ask.output.verdict }}}}"
        tracing: {{experiment: quiet}}
        """))
    copy = str(project.root / "pipelines" / "copy.yaml")
    shutil.copy(path, copy)
    (project.root / "in.json").write_text(json.dumps([{"q": "1"}]))
    cold = cli("run", path, "--input", "in.json", "--out", "cold")      # fills the caches, in this process
    assert cold.exit_code == 0, cold.output
    assert (project.root / "cache" / FOLDER).is_dir()

    cached = fresh_interpreter(project, [
        ["run", path, "--input", "in.json", "--out", "again"],
        ["run", path, "--input", "in.json"],                   # into its group, `latest` pointed at it
        ["run", path, "--input", "in.json", "--out", "untraced", "--trace", "none"],
        ["render", path, "--input", "in.json"]], CALLS + CHECKS + WEB + TRACING + STATISTICS)
    assert cached == {"codes": [0, 0, 0, 0], "imported": []}
    assert project.results("again") == [{"index": 1, "item_key": ANY, "verdict": "yes"}]
    assert len(fake_llm.requests) == 1

    sent = fresh_interpreter(project, [["run", path, "--input", "in.json", "--out", "sent", "--no-cache"],
                                       ["run", copy, "--input", "in.json", "--out", "checked"]],   # not yet valid
                             WEB + TRACING + STATISTICS)
    assert sent == {"codes": [0, 0], "imported": []}
    assert len(fake_llm.requests) == 2

    shipped = str(REPO / "pipelines" / "citation_judge.yaml")
    priced = str(project.pipeline(f"""
        version: 1
        name: priced
        models:
          paid: {{model: gpt-4o-mini, api_base: "{fake_llm.url}"}}
        steps:
          - {{id: ask, uses: llm, with: {{model: paid, prompt: ask.j2}}}}
        output: {{answer: "{{{{ steps.ask.raw }}}}"}}
        """, name="priced.yaml"))
    checked = fresh_interpreter(project, [["validate", path], ["validate", shipped], ["view", "--help"],
                                          ["serve", "--help"],
                                          ["render", priced, "--input", "in.json"]],    # its cost: litellm's prices read as data
                                CALLS + WEB + TRACING + STATISTICS)
    assert checked == {"codes": [0, 0, 0, 0, 0], "imported": []}
