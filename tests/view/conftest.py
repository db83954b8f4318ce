"""A small run under a reports folder, for the view tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import run, write_json


@pytest.fixture
def reports(project) -> Path:
    path = project.pipeline("""
        version: 1
        name: t
        steps:
          - id: c
            uses: compute
            with: {claim: "{{ item.claim }}", verdict: "{{ 'yes' if item.n > 1 else 'no' }}"}
        output:
          claim: "{{ steps.c.claim }}"
          verdict: "{{ steps.c.verdict }}"
        summary:
          count_by: verdict
        """)
    items = write_json(project.root / "in.json", [{"n": 1, "claim": "<script>alert(1)</script>"},
                                                   {"n": 2, "claim": "plain"}, {"n": 3, "claim": "other"}])
    folder = project.root / "reports"
    run(path, items, out=folder / "t" / "r1")
    return folder
