"""Shared fixtures: the in-process scripted model (runner.testing) for runs that are not
about HTTP, the fake LLM server for those that are, and small projects written into tmp_path."""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import signal
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fakellm import FakeLLM  # noqa: E402
from helpers import run_cli  # noqa: E402
from runner.testing import ScriptedModel  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

# A shell starts a background job (`pytest &`, `nohup pytest &`) with Ctrl-C ignored, and every
# process it starts inherits that: the tests that interrupt a run would see the run finish.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """One worker process per core (pytest-xdist) unless `-n` says otherwise: `-n 0` or
    `-p no:xdist` run the tests in this process. Tests marked `xdist_group` share a worker
    (a module's expensive fixture is made once). With Ray installed the tests run in this
    process: under pytest-xdist a worker running the Ray tests died mid-suite and the run
    hung (cause not found; they pass in one process, as .ci/run's Ray stage runs them).

    A worker parses the command line again, without this hook's choice: its controller's
    `--dist` comes in its workerinput (pytest_configure_node), or the worker would not name
    its tests' groups and the controller would schedule them as ungrouped."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        config.option.loadgroup = workerinput.get("dist") == "loadgroup"
        return
    if not config.pluginmanager.has_plugin("xdist") or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if importlib.util.find_spec("ray") is not None:
        return
    if config.option.numprocesses is None and not config.option.collectonly:
        config.option.numprocesses = "auto"
        if config.option.dist == "no":
            config.option.dist = "loadgroup"


def pytest_configure(config: pytest.Config) -> None:
    """The garbage collector runs every 10,000 allocations rather than 700: measured 3.9 s -> 1.8 s
    of collection in tests/engine, tests/checks and tests/outputs (most of it full collections
    walking the imported libraries); cycles are still collected."""
    gc.set_threshold(10_000, 20, 20)


def pytest_sessionfinish() -> None:
    """After the last test, one full garbage collection, then everything left is frozen out of
    the collector. As it closes, pytest collects five times more, to report an error a finalizer
    raises in the tests' garbage, and the interpreter again as it exits; each pass walked a
    worker's whole heap (litellm's and scipy's modules, 600k objects, 0.7-0.9 s a pass here):
    about 8 s at the end of every run. An error of the garbage this pass collects is still
    reported; garbage that a finalizer makes during this pass is frozen, not collected."""
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests of modules that start processes first (in their collected order): they are the
    longest, and pytest-xdist hands tests out in this order, so one collected last kept one
    worker busy alone at the end of the run (a module of fresh-interpreter checks: 8-25 s)."""
    items.sort(key=lambda item: getattr(getattr(item, "module", None), "subprocess", None) is None)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist's controller: tell the worker how its tests are scheduled."""
    node.workerinput["dist"] = node.config.option.dist


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """Headless Chromium with a fresh profile (selenium's driver), for the modules marked
    BROWSER_TESTS (helpers.py)."""
    from helpers import chromium_driver
    yield from chromium_driver(tmp_path / "chromium-profile")


@pytest.fixture(scope="session", autouse=True)
def _no_fsync() -> Iterator[None]:
    """Files the tests' in-process runs write are not forced to the disk (os.fsync of
    fileio.atomic_write_lines): a shared machine's disk made each one wait 2-10 ms, thousands a
    suite, and no test can see the difference (the write is still a temporary file renamed;
    runs in their own process, killed or on a full disk, still fsync)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "fsync", lambda fd: None)
        yield


@pytest.fixture(scope="session")
def _server() -> Any:
    server = FakeLLM().start()
    yield server
    server.stop()


@pytest.fixture
def fake_llm(_server: FakeLLM) -> FakeLLM:
    _server.reset()
    return _server


@pytest.fixture
def scripted_llm() -> Iterator[ScriptedModel]:
    """The scripted model, answering the models named `scripted/...` of every run in this
    test (same scripting as `fake_llm`: script, answer_json, calls, requests, peak_in_flight)."""
    model = ScriptedModel().install()
    yield model
    model.uninstall()


@pytest.fixture
def one_step(project: Project, scripted_llm: ScriptedModel) -> Any:
    """Run a pipeline of one step against the scripted model:
    `one_step("{id: ask, uses: llm, with: {model: m, prompt: hi}}", [{"n": 1}], **run options)`
    (helpers.one_step_pipeline's `model`, `output` and `name` too) -> the RunOutcome."""
    from helpers import one_step_pipeline, run, write_json

    def run_one(step: str, items: list[dict[str, Any]] | None = None, **options: Any) -> Any:
        shape = {key: options.pop(key) for key in ("model", "output", "name") if key in options}
        path = one_step_pipeline(project, step, **shape)
        return run(path, write_json(project.root / "in.json", items if items is not None else [{}]), **options)
    return run_one


class Project:
    """A project folder in tmp_path: pipelines/, prompts/, schemas/, and the working dir."""

    def __init__(self, root: Path):
        self.root = root
        for folder in ("pipelines", "prompts", "schemas", "probes"):
            (root / folder).mkdir(exist_ok=True)

    def pipeline(self, text: str, name: str = "p.yaml") -> Path:
        path = self.root / "pipelines" / name
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    def prompt(self, name: str, text: str) -> Path:
        path = self.root / "prompts" / name
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    def schema(self, name: str, schema: dict[str, Any]) -> Path:
        path = self.root / "schemas" / name
        path.write_text(json.dumps(schema), encoding="utf-8")
        return path

    def file(self, relative: str, text: str) -> Path:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n") if text.startswith("\n") else text, encoding="utf-8")
        return path

    def results(self, out: str = "out") -> list[dict[str, Any]]:
        lines = (self.root / out / "results.jsonl").read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines]

    def summary(self, out: str = "out") -> dict[str, Any]:
        return json.loads((self.root / out / "summary.json").read_text(encoding="utf-8"))


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(tmp_path / "cache"))
    return Project(tmp_path)


@pytest.fixture
def cli() -> Any:
    return run_cli


@pytest.fixture(autouse=True)
def _no_real_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("OPENAI_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY", "LOCAL_LLM_BASE_URL", "OLLAMA_BASE_URL",
                "TAVILY_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
