"""The composite GitHub Action (action.yml) run here: its steps' shell commands, in order, as a
runner would run them (bash -eo pipefail, `if:` and `${{ }}` read from a small context of
inputs, github and step outputs), against a scripted model, with `pip` and `gh` stubbed and
GITHUB_OUTPUT / GITHUB_STEP_SUMMARY as files. No GitHub here."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
ACTION = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
EXPRESSION = re.compile(r"\$\{\{\s*(.+?)\s*\}\}")
NAME = re.compile(r"\b(inputs|github|steps)((?:\.[A-Za-z_][\w-]*)+)")

GH = """#!{python}
'''The GitHub CLI's `api` calls the action makes, against comments kept as files in $GH_FAKE.'''
import os, shutil, sys
from pathlib import Path
store, args = Path(os.environ["GH_FAKE"]), sys.argv[1:]
with open(store / "calls", "a") as log:
    log.write(" ".join(args) + "\\n")
comment = store / "comment.md"
if "--paginate" in args:
    marker = args[args.index("--jq") + 1].split('startswith("', 1)[1].split('")', 1)[0]
    if comment.exists() and comment.read_text().startswith(marker):
        print(17)
elif "--method" in args:
    body = next(a for a in args if a.startswith("body=@"))[len("body=@"):]
    shutil.copy(body, comment)
    (store / "method").write_text(args[args.index("--method") + 1])
"""


def lookup(context: dict[str, Any], dotted: str) -> Any:
    value: Any = context
    for part in dotted.split("."):
        value = value.get(part, "") if isinstance(value, dict) else ""
    return value


def evaluate(condition: str, context: dict[str, Any]) -> bool:
    """An `if:` of the action (names, string literals, ==, !=, &&, ||)."""
    text = NAME.sub(lambda m: repr(lookup(context, m.group(1) + m.group(2))), condition)
    return bool(eval(text.replace("&&", " and ").replace("||", " or "), {"__builtins__": {}}))  # noqa: S307


def substitute(value: str, context: dict[str, Any]) -> str:
    return EXPRESSION.sub(lambda m: str(lookup(context, m.group(1))), value)


def run_action(inputs: dict[str, str], work: Path, env: dict[str, str], event: str) -> tuple[int, str]:
    """Every step of action.yml, as GitHub runs a composite action; (exit code, output)."""
    given = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    context: dict[str, Any] = {"inputs": {**given, **inputs}, "steps": {},
                               "github": {"action_path": str(REPO), "token": "ghs_fake", "repository": "acme/judges",
                                          "event_name": event, "event": {"pull_request": {"number": 7}}}}
    printed = ""
    for number, step in enumerate(ACTION["runs"]["steps"]):
        if "if" in step and not evaluate(step["if"], context):
            continue
        outputs = work / f"output-{number}"
        outputs.write_text("")
        step_env = {**env, "GITHUB_OUTPUT": str(outputs),
                    **{k: substitute(str(v), context) for k, v in (step.get("env") or {}).items()}}
        cwd = work / substitute(step.get("working-directory", "."), context)
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=cwd,
                              env=step_env, capture_output=True, text=True, timeout=300, check=False)
        printed += done.stdout + done.stderr
        if "id" in step:
            lines = [line.partition("=") for line in outputs.read_text().splitlines()]
            context["steps"][step["id"]] = {"outputs": {key: value for key, _, value in lines}}
        if done.returncode:
            return done.returncode, printed
    return 0, printed


@pytest.fixture
def repo_with_a_judge(tmp_path: Path, fake_llm: Any) -> dict[str, Any]:
    work = tmp_path / "repo"
    for folder in ("pipelines", "prompts", "schemas", "probes"):
        (work / folder).mkdir(parents=True)
    (work / "prompts" / "ask.j2").write_text("Judge claim {{ item.claim }}\n")
    (work / "schemas" / "answer.schema.json").write_text(json.dumps(
        {"type": "object", "required": ["verdict"], "properties": {"verdict": {"enum": ["PASS", "FAIL"]}}}))
    (work / "pipelines" / "judge.yaml").write_text(textwrap.dedent("""
        version: 1
        name: judge
        env: [FAKE_URL]
        models:
          m: {model: openai/m, api_base: "{{ env.FAKE_URL }}", retries: 0}
        steps:
          - {id: ask, uses: llm, with: {model: m, prompt: ask.j2, output_schema: answer.schema.json}}
        output: {verdict: "{{ steps.ask.output.verdict }}"}
        summary: {count_by: verdict, rates: {pass_rate: "result.verdict == 'PASS'"}}
        """))
    (work / "claims.json").write_text(json.dumps([{"claim": c} for c in "abc"]))
    (work / "labels.json").write_text(json.dumps([{"index": 1, "label": "PASS"}, {"index": 2, "label": "FAIL"},
                                                  {"index": 3, "label": "PASS"}]))
    stubs, fake_gh = tmp_path / "bin", tmp_path / "gh"
    stubs.mkdir()
    fake_gh.mkdir()
    (stubs / "gh").write_text(GH.format(python=sys.executable))
    (stubs / "pip").write_text(f"#!/usr/bin/env bash\necho \"$*\" >> {tmp_path / 'pip-calls'}\n")
    for stub in ("gh", "pip"):
        (stubs / stub).chmod(0o755)
    summary = tmp_path / "step-summary.md"
    env = {"PATH": f"{stubs}:{Path(sys.executable).parent}:{os.environ['PATH']}", "HOME": str(tmp_path),
           "LANG": "C.UTF-8", "FAKE_URL": fake_llm.url, "GH_FAKE": str(fake_gh), "RUNNER_CACHE_DIR": str(work / "cache"),
           "GITHUB_STEP_SUMMARY": str(summary)}
    return {"work": work, "env": env, "gh": fake_gh, "summary": summary, "pip": tmp_path / "pip-calls",
            "fake": fake_llm}


def test_every_input_reaches_the_scripts_through_env_only():
    steps = ACTION["runs"]["steps"]
    assert ACTION["runs"]["using"] == "composite" and all("run" in step and step["shell"] == "bash" for step in steps)
    assert not [step["name"] for step in steps if "${{" in step["run"]]


@pytest.mark.slow      # the action run four times: a dozen runner processes
def test_the_action_gates_a_pull_request_and_keeps_one_comment(repo_with_a_judge):
    setup = repo_with_a_judge
    fake, work, env = setup["fake"], setup["work"], setup["env"]
    fake.answer_json({"verdict": "PASS"})
    gate = {"pipeline": "pipelines/judge.yaml", "input": "claims.json", "fail-under": "0.5", "labels": "labels.json",
            "fail-under-kappa": "0.5", "max-drop": "0.1"}
    status, printed = run_action(gate, work, env, event="push")             # the baseline, on main
    assert status == 1, printed                                              # every label PASS: kappa 0 < 0.5
    assert "kappa 0.0 is below --fail-under-kappa 0.5" in printed and "no baseline to compare with" in printed
    assert "Not compared: " in setup["summary"].read_text() and not (setup["gh"] / "calls").exists()
    assert setup["pip"].read_text().split() == ["install", "--quiet", str(REPO)]

    fake.reset()
    fake.answer_json({"verdict": "FAIL"}, contains="claim b")
    fake.answer_json({"verdict": "PASS"})
    status, printed = run_action({**gate, "args": "--no-cache"}, work, env, event="pull_request")
    assert status == 1, printed                                              # pass_rate fell by a third
    assert "pass_rate fell from 1 to 0.667 (3/3 -> 2/3): more than --max-drop 0.1" in printed
    shown = setup["summary"].read_text()
    assert "### runner diff: judge" in shown and "| 2 | verdict | PASS | FAIL |" in shown
    assert "| --no-cache | false | true |" in shown
    comment = (setup["gh"] / "comment.md").read_text()
    assert comment.startswith("<!-- runner judge gate: pipelines/judge.yaml -->\n### runner diff: judge")
    assert (setup["gh"] / "method").read_text() == "POST"

    status, printed = run_action({**gate, "max-drop": ""}, work, env, event="pull_request")
    assert status == 0, printed                                              # the same as the run before it
    assert (setup["gh"] / "method").read_text() == "PATCH"                   # the one comment, updated
    assert "No item changed" in (setup["gh"] / "comment.md").read_text()


def test_62_2_a_max_drop_with_no_baseline_fails_closed(repo_with_a_judge):
    setup = repo_with_a_judge
    setup["fake"].answer_json({"verdict": "PASS"})
    status, printed = run_action({"pipeline": "pipelines/judge.yaml", "input": "claims.json", "max-drop": "0.1",
                                  "comment": "false"}, setup["work"], setup["env"], event="push")
    assert status == 1, printed
    assert "max-drop 0.1: no baseline to compare with, so no drop was checked" in printed
    assert "Not compared: " in setup["summary"].read_text()


def test_a_run_that_cannot_start_stops_the_action(repo_with_a_judge):
    setup = repo_with_a_judge
    status, printed = run_action({"pipeline": "pipelines/missing.yaml", "input": "claims.json"}, setup["work"],
                                 setup["env"], event="pull_request")
    assert status == 2 and "pipeline file not found" in printed
    assert not (setup["gh"] / "calls").exists()
