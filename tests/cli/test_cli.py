"""The CLI: run, --record, render, exit codes, crash and Ctrl-C safety."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from unittest.mock import ANY

import pytest

from helpers import SLOW_PIPELINE, group_dir, spawn_run, wait_for_lines, write_json
from runner.runs.folders import resolve_run
from runner.testing import Reply


def test_run_with_record_and_exit_codes(project, cli):
    path = project.pipeline("""
        version: 1
        name: rec
        steps: [{id: s, uses: compute, with: {claim: "{{ item.claim }}", n: "{{ item.start + 1 }}"}}]
        output: {claim: "{{ steps.s.claim }}", n: "{{ steps.s.n }}", ok: "{{ steps.s.n > 5 }}"}
        summary: {rates: {ok_rate: "result.ok"}}
        """)
    result = cli("run", str(path), "--record", "claim=The sky: blue", "--record", "start=12", "--out", "o")
    assert result.exit_code == 0, result.output
    assert project.results("o") == [{"index": 1, "item_key": ANY, "claim": "The sky: blue", "n": 13, "ok": True}]
    assert cli("run", str(path), "--record", "claim=x", "--record", "start=1", "--out", "o",
               "--fail-under", "0.5").exit_code == 1
    assert cli("run", str(path), "--record", "claim=x", "--record", "start=9", "--out", "o",
               "--fail-under", "0.5").exit_code == 0
    missing = cli("run", str(path), "--input", "nothing.json")
    assert missing.exit_code == 2 and "nothing.json: input file not found" in missing.stderr
    assert cli("run", str(path)).exit_code == 2
    bad_set = cli("run", str(path), "--record", "claim=x", "--set", "stepz.s=1")
    assert bad_set.exit_code == 2 and "'stepz' is not a key of the pipeline" in bad_set.stderr
    assert "Traceback" not in bad_set.output


def test_item_errors_do_not_change_the_exit_code(project, cli):
    path = project.pipeline("""
        version: 1
        name: e
        steps: [{id: s, uses: compute, with: {v: "{{ 1 / item.d }}"}}]
        output: {v: "{{ steps.s.v }}"}
        """)
    source = write_json(project.root / "in.json", [{"d": 0}, {"d": 2}])
    result = cli("run", str(path), "--input", str(source))
    assert result.exit_code == 0
    results = project.results(str(resolve_run(group_dir(project.root, "e", "in.json"))))
    assert "ZeroDivisionError" in results[0]["error"] and results[1]["v"] == 0.5


def test_default_out_dir_and_report(project, cli):
    path = project.pipeline("""
        version: 1
        name: dflt
        steps: [{id: s, uses: compute, with: {v: "{{ item.v }}"}}]
        output: {v: "{{ steps.s.v }}"}
        summary: {count_by: v}
        """)
    source = write_json(project.root / "batch.json", [{"v": "a"}, {"v": "b"}, {"v": "a"}])
    assert cli("run", str(path), "--input", str(source)).exit_code == 0
    out = resolve_run(group_dir(project.root, "dflt", "batch.json"))      # the run's own folder (issue 18)
    assert json.loads((out / "summary.json").read_text())["counts"] == {"a": 2, "b": 1}
    assert "| 2 | b |" in (out / "report.md").read_text()


def test_render_prints_prompts_and_sends_nothing(project, cli, scripted_llm):
    project.prompt("ask.j2", "Is {{ item.claim }} supported by line {{ steps.prep.line }}?\n")
    path = project.pipeline("""
        version: 1
        name: r
        models: {m: {model: scripted/m1}}
        steps:
          - {id: prep, uses: compute, with: {line: "{{ item.line + 1 }}"}}
          - {id: ask, uses: llm, with: {model: m, prompt: ask.j2}}
          - {id: again, uses: llm, with: {model: m, prompt: "Follow-up on {{ steps.ask.raw }}"}}
        output: {a: "{{ steps.ask.raw }}"}
        """)
    source = write_json(project.root / "in.json", [{"claim": "sky is blue", "line": 1}, {"claim": "grass", "line": 4}])
    result = cli("render", str(path), "--input", str(source))
    assert result.exit_code == 0, result.output
    assert "=== item 1 ===" in result.stdout and "=== item 2 ===" in result.stdout
    assert "Is sky is blue supported by line 2?" in result.stdout
    assert "Is grass supported by line 5?" in result.stdout
    assert "[not cached]" in result.stdout and "needs a model answer that is not cached" in result.stdout
    assert result.stdout.rstrip().splitlines()[-1].startswith(
        "LLM calls: 2 (0 cached), est. prompt tokens: 16, est. completion tokens: ")
    assert scripted_llm.requests == []
    only = cli("render", str(path), "--input", str(source), "--item", "2")
    assert "=== item 1 ===" not in only.stdout and "line 5" in only.stdout


def test_render_uses_cached_answers_for_later_prompts(project, cli, scripted_llm):
    path = project.pipeline("""
        version: 1
        name: r
        models: {m: {model: scripted/m1}}
        steps:
          - {id: ask, uses: llm, with: {model: m, prompt: "First {{ item.x }}"}}
          - {id: again, uses: llm, with: {model: m, prompt: "Second, after {{ steps.ask.raw }}"}}
        output: {a: "{{ steps.again.raw }}"}
        """)
    scripted_llm.script("ANSWER-ONE", contains="First")
    assert cli("run", str(path), "--record", "x=1").exit_code == 0
    sent = len(scripted_llm.requests)
    result = cli("render", str(path), "--record", "x=1")
    assert "Second, after ANSWER-ONE" in result.stdout
    assert "LLM calls: 2 (2 cached)" in result.stdout
    assert len(scripted_llm.requests) == sent


@pytest.mark.slow
def test_killed_run_leaves_only_complete_lines(project, fake_llm):
    fake_llm.script(Reply("done", delay=0.3))
    path = project.pipeline(SLOW_PIPELINE)
    source = write_json(project.root / "in.json", [{"n": n} for n in range(40)])
    process = spawn_run(project, path, source, fake_llm.url)
    results = project.root / "out" / "results.jsonl"
    wait_for_lines(results, 3)
    process.kill()
    process.wait()
    lines = results.read_text().splitlines()
    assert 3 <= len(lines) < 40
    assert all(json.loads(line)["answer"] == "done" for line in lines)
    # The calls appended so far survive too (in batches: a kill may land between the results
    # line of one of the two items in flight and its call's line, runner/llm/writer.py).
    calls = (project.root / "out" / "calls.jsonl").read_bytes().split(b"\n")
    complete = [json.loads(line) for line in calls[:-1]]
    assert len(complete) >= len(lines) - 2
    assert all(call["messages"][0]["content"].startswith("Item ") for call in complete)


@pytest.mark.slow
def test_ctrl_c_writes_what_finished_and_exits_130(project, fake_llm):
    fake_llm.script(Reply("done", delay=0.3))
    path = project.pipeline(SLOW_PIPELINE)
    source = write_json(project.root / "in.json", [{"n": n} for n in range(40)])
    process = spawn_run(project, path, source, fake_llm.url)
    wait_for_lines(project.root / "out" / "results.jsonl", 2)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    summary = json.loads((project.root / "out" / "summary.json").read_text())
    results = [json.loads(line) for line in (project.root / "out" / "results.jsonl").read_text().splitlines()]
    assert summary["interrupted"] is True and summary["total"] == len(results) >= 2
    assert summary["planned"] == 40 and stdout.startswith(f"{len(results)} of 40 item(s), interrupted")  # issue 32
    made = json.loads((project.root / "out" / "run.json").read_text())
    assert (made["status"], made["interrupted"], made["counts"]["done"]) == ("interrupted", True, len(results))
    assert [r["index"] for r in results] == sorted(r["index"] for r in results)
    headline = (project.root / "out" / "report.md").read_text().splitlines()[0]       # no report looks complete
    assert f"({len(results)} " in headline and "items, interrupted" in headline
    assert "items, interrupted" in (project.root / "out" / "report.html").read_text().split("</h1>")[0]


def test_nothing_litellm_prints_reaches_stdout(project, fake_llm):
    fake_llm.script(Reply(status=500), contains="Item 0")
    fake_llm.script(Reply(status=401), contains="Item 1")
    fake_llm.script(Reply("fine"))
    path = project.pipeline(SLOW_PIPELINE)
    source = write_json(project.root / "in.json", [{"n": n} for n in range(3)])
    env = dict(os.environ, FAKE_URL=fake_llm.url, RUNNER_CACHE_DIR=str(project.root / "cache"))
    done = subprocess.run([sys.executable, "-m", "runner.cli.app", "run", str(path), "--input", str(source),
                           "--out", "out", "--set", "models.m.retries=0"],
                          cwd=project.root, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "3 item(s); errors: 2; LLM calls: 3 sent, 0 cached, 2 failed; written to out\n"
    assert "Give Feedback" not in done.stderr and "LiteLLM" not in done.stderr


def test_steps_lists_arguments_and_result_fields(cli):
    result = cli("steps")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    read_lines = lines.index(next(line for line in lines if line.startswith("read_lines:")))
    assert "    root (required): string  Folder the file must stay inside (relative to the working directory)." \
        in lines[read_lines:]
    assert "  result: exists, status, path, start, end, cited_text, cited_text_tagged, context_before, " \
           "context_after, context_start, total_lines, error." in lines[read_lines:]
    assert ("  result: reason, agreement, decided, votes, outcome, valid_votes, seats, calls, attempts. Plus the vote "
            "field and the fields of the answer schema.") in lines


def test_every_command_maps_user_errors_to_exit_2_in_one_place(project, cli):
    from typer.testing import CliRunner

    from runner.cli.base import RunnerApp as _App
    from runner.errors import RunnerError

    extra = _App()

    @extra.command()
    def boom() -> None:
        raise RunnerError("what went wrong, and where")

    @extra.command()
    def stop() -> None:
        raise KeyboardInterrupt

    result = CliRunner().invoke(extra, ["boom"])
    assert (result.exit_code, result.stderr) == (2, "what went wrong, and where\n")
    assert CliRunner().invoke(extra, ["stop"]).exit_code == 130
    for args in (["render", "pipelines/none.yaml", "--record", "x=1"], ["run", "pipelines/none.yaml"],
                 ["feedback", "--store", "nowhere", "--trace-id", "t", "--up"]):
        result = cli(*args)
        assert result.exit_code == 2 and "Traceback" not in result.output, args
