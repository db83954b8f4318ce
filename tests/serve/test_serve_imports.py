"""`runner serve`'s stack is for `runner serve` only: running, validating and the other
commands' help never import FastAPI, psycopg or python-multipart."""

from __future__ import annotations

import subprocess
import sys

from helpers import write_json

BLOCK = ("import sys; sys.modules['fastapi'] = sys.modules['psycopg'] = sys.modules['multipart'] = "
         "sys.modules['python_multipart'] = None; from runner.cli.app import main; main()")


def test_run_and_validate_import_no_fastapi_or_psycopg(project):
    path = project.pipeline("""
        version: 1
        name: t
        steps: [{id: c, uses: compute, with: {n: "{{ item.n }}"}}]
        output: {n: "{{ steps.c.n }}"}
        """)
    write_json(project.root / "in.json", [{"n": 1}])
    for args in (["validate", str(path)], ["run", str(path), "--input", "in.json", "--out", "out"], ["serve", "--help"]):
        done = subprocess.run([sys.executable, "-c", BLOCK, *args], cwd=project.root, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    assert project.results("out")[0]["n"] == 1
