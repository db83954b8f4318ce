"""Small helpers shared by tests."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.api import ItemSource, RunOutcome, run_pipeline
from runner.runs.folders import group_name
from runner.runs.request import RunOptions
from runner.testing import Reply, ScriptedModel

# A pipeline that echoes each item's `v` as its verdict; A passes (its first rate).
VERDICTS = """
    version: 1
    name: t
    steps: [{id: echo, uses: compute, with: {v: "{{ item.v }}"}}]
    output: {verdict: "{{ steps.echo.v }}"}
    summary:
      count_by: verdict
      rates: {ok_rate: "{{ result.verdict == 'A' }}"}
    """


def copy_example(source: Path, target: Path, **options: Any) -> Path:
    """A checked-in folder copied as git has it: what a run of the README's first command left
    there (reports/, cache/) stays behind, so no test sees another run's outputs."""
    return Path(shutil.copytree(source, target, ignore=shutil.ignore_patterns("cache", "reports", "__pycache__"),
                                **options))


def group_dir(root: Path, pipeline: str, input_file: str) -> Path:
    """reports/<pipeline>/<stem>-<hash>/ of an input at `root / input_file` (root: the project)."""
    return root / "reports" / pipeline / group_name(root / input_file, [], root)


def calls_of(run_folder: Path) -> list[dict[str, Any]]:
    """The calls of a run's calls.jsonl, in file order."""
    return [json.loads(line) for line in (run_folder / "calls.jsonl").read_text(encoding="utf-8").splitlines()]


def write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def run(pipeline: Path, input_path: Path | None = None, records: list[str] | None = None,
        overrides: list[str] | None = None, out: str | Path = "out", **options: Any) -> RunOutcome:
    root = pipeline.parent.parent
    progress = options.pop("progress", None)
    executor = options.pop("executor", None)
    opts = RunOptions(cache_dir=Path(options.pop("cache_dir", root / "cache")), out_dir=Path(out), **options)
    return run_pipeline(pipeline, ItemSource(input_path, records or []), opts, overrides or [], progress,
                        executor=executor)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
# A module of Chromium tests: `pytestmark = BROWSER_TESTS` (slow; skipped, saying why, without Chromium).
BROWSER_TESTS = [pytest.mark.slow, pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER),
                                                      reason="Chromium not installed: apt-get install -y chromium chromium-driver")]


def chromium_driver(profile: Path) -> Iterator[Any]:
    """Headless Chromium (Debian's chromium and chromium-driver, through selenium) with a fresh
    profile; quit when the generator closes (the `browser` fixture of tests/conftest.py)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM or "chromium"
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                f"--user-data-dir={profile}", "--window-size=1400,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def scripted_seats(*models: str) -> list[str]:
    """`--set` overrides that put the scripted model (runner.testing) in the given seats of a
    shipped pipeline: `models.NAME.model=scripted/NAME` and no api_base."""
    return [setting for name in models for setting in (f"models.{name}.model=scripted/{name}", f"models.{name}.api_base=null")]


def one_step_pipeline(project: Any, step: str, *, model: str = "{model: scripted/m}",
                      output: str = '{answer: "{{ steps.ask.raw }}"}', name: str = "one") -> Path:
    """A pipeline of one step (`step`: YAML, e.g. `{id: ask, uses: llm, with: {model: m,
    prompt: p.j2}}`) whose model `m` is the scripted model, written into the project."""
    return project.pipeline("\n".join([
        "version: 1", f"name: {name}", f"models: {{m: {model}}}", f"steps: [{step}]", f"output: {output}", ""]))


def scripted_model(answer: str = '{"verdict": "yes"}') -> ScriptedModel:
    """A scripted model answering `answer` where no rule matches, not installed: handed to
    a runtime as its transport (`SharedClient.open(transport=...)`, serve's `Settings`)."""
    model = ScriptedModel()
    model.default = Reply(answer)
    return model


def server_error(message: str, status: int = 500) -> Reply:
    """A scripted reply a server sends when it fails: its JSON error saying `message`."""
    return Reply(status=status, raw_body=json.dumps({"error": {"message": message}}))


# A one-call-an-item pipeline for runs in their own process, to be killed midway.
SLOW_PIPELINE = """
    version: 1
    name: slow
    env: [FAKE_URL]
    models:
      m: {model: openai/m1, api_base: "{{ env.FAKE_URL }}"}
    steps:
      - id: ask
        uses: llm
        with: {model: m, prompt: "Item {{ item.n }}"}
    output: {answer: "{{ steps.ask.raw }}"}
    """


def spawn_run(project: Any, path: Path, source: Path, fake_url: str) -> subprocess.Popen:
    """`runner run PATH --input SOURCE --out out` as its own process, its models at `fake_url`."""
    env = dict(os.environ, FAKE_URL=fake_url, RUNNER_CACHE_DIR=str(project.root / "cache"))
    return subprocess.Popen([sys.executable, "-m", "runner.cli.app", "run", str(path), "--input", str(source),
                             "--out", "out", "--concurrency", "2"],
                            cwd=project.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_lines(file: Path, count: int, timeout: float = 60) -> None:
    """Wait until `file` has at least `count` lines."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if file.exists() and len(file.read_text().splitlines()) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{file} never reached {count} lines")


def run_cli(*args: str, env: dict[str, str] | None = None, input: str | None = None) -> Any:
    """Run the CLI in-process (click's runner) as the `runner` command does: the app narrowed
    to the command the arguments name, built once a test process (`_command`); `input` is its
    standard input. Returns the click Result."""
    from click.testing import CliRunner

    return CliRunner().invoke(_command(args[0] if args else None), list(args), input=input, env=env,
                              catch_exceptions=False)


@functools.cache
def _command(first: str | None) -> Any:
    """The click command of the app narrowed to the command (or group) `first` names. typer
    builds it anew at each start (10-100 ms); a click command keeps no state between calls."""
    import typer.main

    from runner.cli.app import app
    return typer.main.get_command(app.narrowed_to([first] if first is not None else []))
