"""`runner diff` says every way two runs were made differently that changes their results or
cost, each under its own label, and writes a pull-request comment with `--format markdown`."""

from __future__ import annotations

import json

import pytest

from helpers import group_dir, write_json
from runner.runs.folders import runs_in

POLL = "batch_poll_seconds: 0.02"


@pytest.fixture
def judge(project, fake_llm, monkeypatch):
    monkeypatch.setenv("FAKE_URL", fake_llm.url)
    project.prompt("ask.j2", "Judge {{ item.claim }}\n")
    project.schema("answer.schema.json", {"type": "object", "required": ["verdict"],
                                          "properties": {"verdict": {"type": "string"}}})
    fake_llm.answer_json({"verdict": "FAIL"}, contains="Judge b")
    fake_llm.answer_json({"verdict": "PASS"})
    write_json(project.root / "claims.json", [{"claim": c} for c in "abc"])
    return project.pipeline(f"""
        version: 1
        name: judge
        env: [FAKE_URL]
        models:
          m: {{model: openai/m, api_base: "{{{{ env.FAKE_URL }}}}", retries: 0, {POLL}}}
        steps:
          - {{id: ask, uses: llm, with: {{model: m, prompt: ask.j2, output_schema: answer.schema.json}}}}
        output: {{verdict: "{{{{ steps.ask.output.verdict }}}}"}}
        summary: {{count_by: verdict, rates: {{pass_rate: "result.verdict == 'PASS'"}}}}
        """)


def test_diff_names_batch_model_cache_and_concurrency_each_under_its_own_label(judge, project, fake_llm, cli):
    """Finding 9: a live run against a --batch run was `made the same way`, and --model flags
    were listed under `--set:`."""
    first = cli("run", str(judge), "--input", "claims.json", "--quiet", "--cache-dir", "cache")
    assert first.exit_code == 0, first.output
    second = cli("run", str(judge), "--input", "claims.json", "--quiet", "--batch", "--cache-dir", "other-cache",
                 "--concurrency", "4", "--model", f"m=openai/m@{fake_llm.url}")
    assert second.exit_code == 0, second.output
    shown = cli("diff")
    assert shown.exit_code == 0, shown.output
    assert "made the same way" not in shown.stdout
    lines = shown.stdout.splitlines()
    assert "  --batch: false -> true" in lines
    assert "  --cache-dir: cache -> other-cache" in lines
    assert "  --concurrency: 8 -> 4" in lines
    assert f'  --model: [] -> ["m=openai/m@{fake_llm.url}"]' in lines
    assert not any(line.startswith("  --set:") for line in lines), lines


@pytest.mark.slow      # a run in worker processes
def test_diff_names_the_executor(judge, project, cli):
    assert cli("run", str(judge), "--input", "claims.json", "--quiet").exit_code == 0
    done = cli("run", str(judge), "--input", "claims.json", "--quiet", "--executor", "processes", "--workers", "1")
    assert done.exit_code == 0, done.output
    lines = cli("diff").stdout.splitlines()
    assert "  --executor: local -> processes" in lines and "  --workers: - -> 1" in lines


def test_diff_as_markdown_for_a_pull_request_comment(judge, project, fake_llm, cli):
    assert cli("run", str(judge), "--input", "claims.json", "--quiet").exit_code == 0
    fake_llm.reset()
    fake_llm.answer_json({"verdict": "PASS"})
    assert cli("run", str(judge), "--input", "claims.json", "--quiet", "--no-cache").exit_code == 0
    shown = cli("diff", "--format", "markdown")
    assert shown.exit_code == 0, shown.output
    text = shown.stdout
    assert text.startswith("### runner diff: judge")
    assert "| --no-cache | false | true |" in text
    assert "| verdict | before | after |" in text and "| PASS | 2 | 3 |" in text and "| FAIL | 1 | 0 |" in text
    assert "| pass_rate | 0.6667 (2/3) | 1 (3/3) |" in text
    assert "| 2 | verdict | FAIL | PASS |" in text
    group = group_dir(project.root, "judge", "claims.json")
    before, after = runs_in(group)
    as_json = json.loads(cli("diff", str(before), str(after), "--format", "json").stdout)
    assert as_json["changed"] == [{"index": 2, "changes": {"verdict": ["FAIL", "PASS"]}}]
