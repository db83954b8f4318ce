"""`runner <command>` builds only that command (the same parameters, help and errors), and
the command line collects garbage as collector.py says."""

from __future__ import annotations

import gc
import subprocess
import sys

import typer.main
from typer.testing import CliRunner

from runner.cli.app import app
from runner.cli.collector import WHILE_IMPORTING, YOUNGEST_GENERATION


def _built(args: list[str]) -> list[str]:
    return sorted(typer.main.get_command(app.narrowed_to(args)).list_commands(None))  # type: ignore[attr-defined]


def test_a_command_or_group_is_built_alone():
    assert _built(["run", "x.yaml"]) == ["run"]
    assert _built(["list"]) == ["list"]                 # registered under a name of its own
    assert _built(["cache", "clear"]) == ["cache"]      # a command group
    every = _built([])
    assert {"run", "validate", "render", "list", "cache", "labels"} <= set(every)
    for args in (["--help"], ["--version"], ["nosuch"], ["-x", "run"]):
        assert _built(args) == every


def test_narrowed_help_and_errors_read_as_the_whole_apps():
    runner = CliRunner()
    for args in (["run", "--help"], ["validate", "--help"], ["cache", "--help"], ["run"],
                 ["run", "p.yaml", "--no-such-flag"]):
        whole, narrowed = runner.invoke(app, args), runner.invoke(app.narrowed_to(args), args)
        assert (narrowed.exit_code, narrowed.output) == (whole.exit_code, whole.output), args
        assert whole.output


def test_the_runner_command_still_reports_an_unknown_command():
    done = subprocess.run([sys.executable, "-c", "from runner.cli.app import main; main()", "rnu"],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert "No such command 'rnu'" in done.stderr


PIPELINE = """
    version: 1
    name: g
    steps: [{id: s, uses: compute, with: {n: "{{ item.start + 1 }}"}}]
    output: {n: "{{ steps.s.n }}"}
    """


def test_nothing_is_collected_while_the_command_imports():
    code = "import gc; t = gc.get_threshold()[0]; import runner.cli.app; print(t, *gc.get_threshold())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    default, youngest, middle, oldest = map(int, done.stdout.split())
    assert (youngest, middle, oldest) == (WHILE_IMPORTING, 10, 10)
    assert default < YOUNGEST_GENERATION < youngest


def test_the_runner_process_freezes_its_imports_and_then_collects_young_objects_less_often(project):
    path = project.pipeline(PIPELINE)
    out = project.root / "o"
    code = f"""
import gc, sys
import runner.cli.app as app
importing = gc.get_threshold()[0]
command = app.main
def main():
    try:
        command()
    finally:
        print(importing, gc.get_threshold()[0], gc.get_freeze_count() > 0, flush=True)
app.main = main
sys.argv = ["runner", "run", {str(path)!r}, "--record", "start=1", "--out", {str(out)!r}]
app.entry()
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=project.root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].split() == [str(WHILE_IMPORTING), str(YOUNGEST_GENERATION), "True"]
    assert project.results("o")[0]["n"] == 2


def test_a_process_that_only_imports_runner_is_never_frozen(project, cli):
    path = project.pipeline(PIPELINE)
    frozen = gc.get_freeze_count()
    for args in (["run", str(path), "--record", "start=1", "--out", "o"], ["validate", str(path)]):
        gc.set_threshold(WHILE_IMPORTING)
        assert cli(*args).exit_code == 0
        assert gc.get_threshold()[0] == YOUNGEST_GENERATION     # the command's imports were done
    assert gc.get_freeze_count() == frozen
