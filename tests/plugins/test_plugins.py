"""Project plugins: a step type, an input adapter and a Jinja filter from a package installed
with pip (entry points), or from a module file the pipeline names (`plugins:`), used by
validate, steps and run under the local and processes executors (Ray: ray-marked).

The package is a wheel built here and unzipped into a temporary folder (as `pip install
--target` installs it); the commands that use it (or a module file plugin) run in a subprocess
with that folder on PYTHONPATH, so neither this test process nor its virtual environment ever
imports or holds it. The refusals, which register nothing, run in this process (`validate_here`)."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from runner.templating.filters import PLUGIN_FILTERS
from runner.templating.sandbox import Renderer

pytestmark = pytest.mark.xdist_group("plugin_wheel")      # the module's installed plugin is made once

PLUGIN = '''
"""A plugin of runner: the step type word_count, the input adapter lines, the filter shout."""

from pathlib import Path

from runner.engine.steps.base import Step, register
from runner.inputs import Record, adapter
from runner.templating.filters import template_filter


@register
class WordCount(Step):
    name = "word_count"
    summary = "Count the words of `text`; `enough` when there are at least `min`."
    schema = {"type": "object", "additionalProperties": False, "required": ["text"],
              "properties": {"text": {"type": "string", "description": "The text to count."},
                             "min": {"type": "integer", "minimum": 0, "description": "Words enough."}}}
    result = {"type": "object", "additionalProperties": False,
              "properties": {"words": {"type": "integer"}, "enough": {"type": "boolean"}}}

    async def run(self, ctx):
        words = len(str(ctx.args["text"]).split())
        return {"words": words, "enough": words >= ctx.args.get("min", 0)}


@adapter("lines")
def read_lines(path: Path, options: dict):
    """One record per line that is not blank: its number and text."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            yield Record({"line": number, "text": line.strip()})


@template_filter("shout")
def shout(text):
    return str(text).upper() + "!"
'''

ENTRY_POINTS = """\
[runner.filters]
shout = runner_wordcount:shout

[runner.inputs]
lines = runner_wordcount:read_lines

[runner.steps]
word_count = runner_wordcount:WordCount
"""

PIPELINE = """\
version: 1
name: words
input: {adapter: lines}
steps:
  - id: count
    uses: word_count
    with: {text: "{{ item.text }}", min: 3}
output:
  line: "{{ item.line }}"
  words: "{{ steps.count.words }}"
  enough: "{{ steps.count.enough }}"
  loud: "{{ item.text | shout }}"
summary: {count_by: enough}
"""
TEXT = "one two three\n\nfour five\nsix seven eight nine\n"
EXPECTED = [{"line": 1, "words": 3, "enough": True, "loud": "ONE TWO THREE!"},
            {"line": 3, "words": 2, "enough": False, "loud": "FOUR FIVE!"},
            {"line": 4, "words": 4, "enough": True, "loud": "SIX SEVEN EIGHT NINE!"}]


def build_wheel(folder: Path) -> Path:
    """runner_wordcount-1.0-py3-none-any.whl: the module, its metadata and its entry points."""
    info = "runner_wordcount-1.0.dist-info"
    files = {"runner_wordcount.py": PLUGIN,
             f"{info}/METADATA": "Metadata-Version: 2.1\nName: runner-wordcount\nVersion: 1.0\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
             f"{info}/entry_points.txt": ENTRY_POINTS}
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    wheel = folder / "runner_wordcount-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The plugin installed into a folder of its own (never into the test environment). A pure
    wheel's install is its unzip (what `pip install --target` writes, but pip's INSTALLER and
    REQUESTED files): Python finds the module and its entry points the same way, and no pip
    process (1.4 s of CPU) starts."""
    folder = tmp_path_factory.mktemp("plugin")
    target = folder / "site"
    with zipfile.ZipFile(build_wheel(folder)) as wheel:
        wheel.extractall(target)
    return target


def runner(*args: str, cwd: Path, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RUNNER_CACHE_DIR": str(cwd / "cache")}
    env.pop("PYTHONPATH", None)
    if path is not None:
        env["PYTHONPATH"] = str(path)
    return subprocess.run([sys.executable, "-m", "runner.cli.app", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def validate_here(cli, monkeypatch, project: Path, pipeline: str):
    """`runner validate PIPELINE` from `project`, in this process (for pipelines whose plugins are refused)."""
    monkeypatch.chdir(project)
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(project / "cache"))
    return cli("validate", pipeline)


def executor_flags(executor: str) -> list[str]:
    return [] if executor == "local" else ["--executor", executor, "--workers", "2"]


def results(folder: Path) -> list[dict]:
    lines = (folder / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return [{k: r[k] for k in ("line", "words", "enough", "loud")} for r in map(json.loads, lines)]


@pytest.fixture
def words(tmp_path) -> Path:
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "words.yaml").write_text(PIPELINE, encoding="utf-8")
    (tmp_path / "notes.txt").write_text(TEXT, encoding="utf-8")
    return tmp_path


def test_an_installed_plugin_is_listed_checked_and_runs_locally(installed, words):
    listed = runner("steps", cwd=words, path=installed)
    assert listed.returncode == 0, listed.stderr
    assert "word_count: Count the words of `text`; `enough` when there are at least `min`." in listed.stdout
    assert "    text (required): string  The text to count." in listed.stdout
    assert "  result: words, enough." in listed.stdout
    checked = runner("validate", "pipelines/words.yaml", cwd=words, path=installed)
    assert (checked.returncode, checked.stdout) == (0, "pipelines/words.yaml: ok (1 steps)\n"), checked.stderr
    ran = runner("run", "pipelines/words.yaml", "--input", "notes.txt", "--out", "local", "--quiet", cwd=words,
                 path=installed)
    assert ran.returncode == 0, ran.stderr
    assert results(words / "local") == EXPECTED


@pytest.mark.slow      # worker processes
def test_an_installed_plugin_runs_in_worker_processes(installed, words):
    ran = runner("run", "pipelines/words.yaml", "--input", "notes.txt", "--out", "processes", "--quiet",
                 *executor_flags("processes"), cwd=words, path=installed)
    assert ran.returncode == 0, ran.stderr
    assert results(words / "processes") == EXPECTED


def test_validate_checks_a_plugin_steps_arguments_against_its_schema(installed, words):
    wrong = PIPELINE.replace("min: 3", "min: -1")
    (words / "pipelines" / "wrong.yaml").write_text(wrong.replace("{{ steps.count.words }}",
                                                                  "{{ steps.count.letters }}"), encoding="utf-8")
    checked = runner("validate", "pipelines/wrong.yaml", cwd=words, path=installed)
    assert checked.returncode == 2
    assert "pipelines/wrong.yaml:7:" in checked.stderr and "-1 is less than the minimum of 0" in checked.stderr
    assert "step 'count' has no field 'letters' (its fields: enough, words" in checked.stderr


def test_without_the_package_the_names_are_unknown(words, cli, monkeypatch):
    checked = validate_here(cli, monkeypatch, words, "pipelines/words.yaml")
    assert checked.exit_code == 2
    assert "unknown input adapter 'lines'" in checked.stderr and "unknown step type 'word_count'" in checked.stderr


def with_module_file(words: Path) -> Path:
    """The words project naming the plugin as a module file of its own (`plugins:`)."""
    (words / "plugins").mkdir()
    (words / "plugins" / "wordcount.py").write_text(PLUGIN, encoding="utf-8")
    (words / "pipelines" / "words.yaml").write_text("plugins: [plugins/wordcount.py]\n" + PIPELINE, encoding="utf-8")
    return words


def test_a_module_file_the_pipeline_names_is_a_plugin(words):
    with_module_file(words)
    listed = runner("steps", "--pipeline", "pipelines/words.yaml", cwd=words)
    assert listed.returncode == 0 and "word_count: Count the words" in listed.stdout, listed.stderr
    ran = runner("run", "pipelines/words.yaml", "--input", "notes.txt", "--out", "local", "--quiet", cwd=words)
    assert ran.returncode == 0, ran.stderr
    assert results(words / "local") == EXPECTED
    manifest = json.loads((words / "local" / "run.json").read_text(encoding="utf-8"))
    assert manifest["pipeline"]["resolved"]["plugins"] == ["plugins/wordcount.py"]
    assert manifest["pipeline"]["files"]["plugins/wordcount.py"] == hashlib.sha256(PLUGIN.encode()).hexdigest()


@pytest.mark.slow      # worker processes
def test_a_module_file_plugin_runs_in_worker_processes(words):
    ran = runner("run", "pipelines/words.yaml", "--input", "notes.txt", "--out", "processes", "--quiet",
                 *executor_flags("processes"), cwd=with_module_file(words))
    assert ran.returncode == 0, ran.stderr
    assert results(words / "processes") == EXPECTED


@pytest.mark.parametrize(("entry", "message"), [
    ("../outside.py", "plugin '../outside.py': path '../outside.py' leaves the project root"),
    ("plugins/missing.py", "plugin 'plugins/missing.py': file 'plugins/missing.py' not found under"),
    ("no_such_module_here", "plugin 'no_such_module_here': no module named 'no_such_module_here' (install"),
    ("plugins/broken.py", "plugin 'plugins/broken.py': plugin "),
    ("plugins/clash.py", "plugin 'plugins/clash.py': step type 'compute' is registered twice "
                         "(runner.engine.steps.compute.Compute and "),
])
def test_a_plugin_that_cannot_be_imported_is_refused_at_its_entry(words, entry, message, cli, monkeypatch):
    (words / "outside.py").write_text("raise SystemExit('imported')\n", encoding="utf-8")
    (words / "plugins").mkdir()
    (words / "plugins" / "broken.py").write_text("1 / 0\n", encoding="utf-8")
    (words / "plugins" / "clash.py").write_text(
        "from runner.engine.steps.base import Step, register\n\n\n"
        "@register\nclass Mine(Step):\n    name = 'compute'\n", encoding="utf-8")
    (words / "pipelines" / "p.yaml").write_text(f"plugins: ['{entry}']\n" + PIPELINE, encoding="utf-8")
    checked = validate_here(cli, monkeypatch, words, "pipelines/p.yaml")
    assert checked.exit_code == 2
    assert f"pipelines/p.yaml:1:11: plugins[0]: {message}" in checked.stderr, checked.stderr
    if entry == "plugins/broken.py":
        assert "importing it failed: ZeroDivisionError: division by zero" in checked.stderr


@pytest.mark.ray
@pytest.mark.skipif(not (os.environ.get("RUNNER_REQUIRE_RAY") == "1" or importlib.util.find_spec("ray")),
                    reason="the ray extra is not installed")
def test_an_installed_plugin_runs_on_ray(installed, words):
    ran = runner("run", "pipelines/words.yaml", "--input", "notes.txt", "--out", "ray", "--quiet",
                 *executor_flags("ray"), cwd=words, path=installed)
    assert ran.returncode == 0, ran.stderr
    assert results(words / "ray") == EXPECTED



def test_the_readme_plugin_example_runs_as_a_named_file(words):
    readme = (Path(__file__).resolve().parents[2] / "docs" / "writing-pipelines.md").read_text(encoding="utf-8")
    section = readme.split("### Plugins: step types, input adapters and filters of your own", 1)[1]
    (source,) = re.findall(r"```python\n(.*?)```", re.split(r"\n#{2,3} ", section, maxsplit=1)[0], re.DOTALL)
    (words / "plugins").mkdir()
    (words / "plugins" / "steps.py").write_text(source, encoding="utf-8")
    (words / "pipelines" / "readme.yaml").write_text(
        "plugins: [plugins/steps.py]\n" + PIPELINE.replace(", min: 3", "").replace(
            '  enough: "{{ steps.count.enough }}"\n', "").replace("summary: {count_by: enough}\n", ""),
        encoding="utf-8")
    ran = runner("run", "pipelines/readme.yaml", "--input", "notes.txt", "--out", "out", "--quiet", cwd=words)
    assert ran.returncode == 0, ran.stderr
    lines = (words / "out" / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert [(r["line"], r["words"], r["loud"]) for r in map(json.loads, lines)] == [
        (1, 3, "ONE TWO THREE!"), (3, 2, "FOUR FIVE!"), (4, 4, "SIX SEVEN EIGHT NINE!")]


def test_a_plugin_filter_on_a_constant_is_called_again_in_each_run(monkeypatch):
    """Jinja calls a filter on constants while compiling: code kept for the process would give
    every later run the first run's answer (a date, a counter, a file's contents)."""
    stamps = iter(range(1_000))
    monkeypatch.setitem(PLUGIN_FILTERS, "stamp", lambda value: f"{value}-{next(stamps)}")
    answers = {Renderer().value("{{ 'batch' | stamp }}", {}) for _ in range(3)}
    assert answers == {"batch-0", "batch-1", "batch-2"}
