"""`runner <command>` builds only that command (the same parameters, help and errors)."""

from __future__ import annotations

import sys

import pytest
import typer.main
from typer.testing import CliRunner

from runner.cli.app import app, main


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


def test_the_runner_command_still_reports_an_unknown_command(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["runner", "rnu"])
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code == 2
    assert "No such command 'rnu'" in capsys.readouterr().err
