"""Schemathesis against `runner serve`'s own /openapi.json (issue 63 "Done when"): a real
server process, every operation with a few generated requests (valid and not), every check
Schemathesis has: no 500, and no status, header or body the document does not describe.
Bounded (a few examples an operation, well under 3 minutes): `.ci/run` runs it as its own step,
on PostgreSQL there (RUNNER_TEST_POSTGRES_DSN), on SQLite without one.

Every check but one: `positive_data_acceptance` expects every request the document allows to
be accepted, but what a request may set (`params`) and the records it sends are the
pipeline's, named in the path, which one document for every pipeline cannot spell out; the
server refuses other params with 400 by design (undeclared or model-changing params)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from serve_fixtures import POSTGRES_DSN, Process, backend_url

ANSWER = json.dumps({"rating": "green", "score": 90})
EXAMPLES = 3            # a few generated requests an operation and phase


@pytest.mark.slow
def test_issue63_schemathesis_finds_no_500_and_nothing_the_document_does_not_say(served_project, fake_llm):
    db_url = backend_url("postgresql" if POSTGRES_DSN else "sqlite", served_project.root)
    fake_llm.script(*[ANSWER] * 2000)
    server = Process(served_project.root, "--model", f"judge=openai/judge@{fake_llm.url}", "--max-items", "5",
                     "--db", db_url).ready()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "schemathesis.cli", "run", f"{server.url}/openapi.json", "--checks", "all",
             "--exclude-checks", "positive_data_acceptance",
             "--max-examples", str(EXAMPLES), "--workers", "1", "--phases", "examples,coverage,fuzzing",
             "--request-timeout", "30", "--suppress-health-check", "all", "--seed", "63"],
            cwd=served_project.root, capture_output=True, text=True, timeout=170)
    finally:
        server.stop()
    print(done.stdout[-3000:])
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:] + server.log.read_text()[-4000:]
