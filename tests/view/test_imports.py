"""The web stack is for `runner view` and `runner serve` only: running and validating never
import it (nor FastAPI, psycopg or python-multipart, which only `runner serve` uses)."""

from __future__ import annotations

import subprocess
import sys

from helpers import write_json

BLOCK = ("import sys; sys.modules['starlette'] = sys.modules['uvicorn'] = sys.modules['fastapi'] = "
         "sys.modules['psycopg'] = sys.modules['multipart'] = sys.modules['python_multipart'] = None; "
         "from runner.cli.app import main; main()")


def test_run_and_validate_import_no_starlette_or_uvicorn(project):
    path = project.pipeline("""
        version: 1
        name: t
        steps:
          - id: c
            uses: compute
            with: {n: "{{ item.n }}"}
        output:
          n: "{{ steps.c.n }}"
        """)
    write_json(project.root / "in.json", [{"n": 1}])
    for args in (["validate", str(path)], ["run", str(path), "--input", "in.json", "--out", "out"]):
        done = subprocess.run([sys.executable, "-c", BLOCK, *args], cwd=project.root, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    assert project.results("out")[0]["n"] == 1
    for command in ("view", "serve"):
        helped = subprocess.run([sys.executable, "-c", BLOCK, command, "--help"], cwd=project.root,
                                capture_output=True, text=True, timeout=60)
        assert helped.returncode == 0, helped.stderr
