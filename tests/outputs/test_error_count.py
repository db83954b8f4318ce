"""How a run counts its errors: each errored item once (summary.json `errors`, `error_groups`,
--max-errors), whatever its output calls `index` and whichever executor ran it."""

from __future__ import annotations

import json

import pytest

from fakellm import Reply
from helpers import write_json


@pytest.mark.parametrize("executor", [[], pytest.param(["--executor", "processes", "--workers", "2"],
                                                        marks=pytest.mark.slow)])       # worker processes
@pytest.mark.parametrize("on_error", ["fail", "continue"])
def test_an_errored_item_counts_once_when_the_output_sets_index(project, fake_llm, cli, monkeypatch, executor,
                                                                on_error):
    """Issue 50, R2 (issue 51's 'errors counted once'): records numbered in reverse by the
    output's `index`; the item at input position 2 gets an HTTP 500 (its step fails it, or
    carries on: then the LLM tally knows, and the result is given its error as it is written).
    It is one error, in one group, in results.jsonl too, and --max-errors 1 lets the run pass."""
    monkeypatch.setenv("FAKE_URL", fake_llm.url)
    project.prompt("ask.j2", "Question {{ item.q }}\n")
    path = project.pipeline(f"""
        version: 1
        name: r2
        env: [FAKE_URL]
        models:
          m: {{model: openai/m, api_base: "{{{{ env.FAKE_URL }}}}", retries: 0}}
        steps:
          - {{id: ask, uses: llm, on_error: {on_error}, with: {{model: m, prompt: ask.j2}}}}
        output:
          index: "{{{{ item.id }}}}"
          answer: "{{{{ steps.ask.raw | default('none') }}}}"
        """)
    fake_llm.script(Reply(status=500), contains="Question q2")
    fake_llm.script(Reply("fine"))
    source = write_json(project.root / "in.json", [{"id": 4 - n, "q": f"q{n + 1}"} for n in range(4)])
    done = cli("run", str(path), "--input", str(source), "--out", "o", "--max-errors", "1", *executor)
    assert done.exit_code == 0, done.output
    summary = json.loads((project.root / "o" / "summary.json").read_text())
    assert summary["errors"] == 1 and [group["count"] for group in summary["error_groups"]] == [1]
    assert "HTTP 500" in summary["error_groups"][0]["error"] and "errors: 1;" in done.stdout
    errored = [bool(r.get("error")) for r in project.results("o")]
    assert errored == [False, False, True, False]


def test_error_groups_past_the_ten_listed_are_counted_together(project, cli):
    """30 items failing each its own way: error_groups listed 10 groups of 10 items beside
    `errors: 30`; the others are one group now, and the groups add up."""
    path = project.pipeline("""
        version: 1
        name: many
        steps: [{id: f, uses: fail, with: {message: "bad item {{ item.n }}"}}]
        output: {n: "{{ item.n }}"}
        """)
    done = cli("run", str(path), "--input", str(write_json(project.root / "in.json", [{"n": n} for n in range(30)])),
               "--out", "o", "--quiet")
    summary = json.loads((project.root / "o" / "summary.json").read_text())
    assert done.exit_code == 3 and summary["errors"] == 30
    assert [group["count"] for group in summary["error_groups"]] == [1] * 10 + [20]
    assert summary["error_groups"][-1]["error"] == "(other errors)"
