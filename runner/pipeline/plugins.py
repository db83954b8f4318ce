"""`plugins:`: the Python modules a pipeline names, whose step types, input adapters and
filters it uses. An entry is an importable module name (`my_judges.steps`) or a `.py` file
named relative to the project folder (the folder holding pipelines/), which must stay inside
it (`plugins/scoring.py`). Nothing else is imported: a file plugin's folder is not put on the
import path, and no folder is searched for code the pipeline did not name.

A module registers what it brings as the built-ins do: `@register` on a Step subclass
(runner.engine.steps.base; its `schema` is its `with:` schema), `@adapter("name")` on an input
adapter (runner.inputs) and `@template_filter("name")` on a filter
(runner.templating.filters). Installed packages may instead register through entry points
(runner/registry.py): they need no `plugins:` entry.

The loader imports the plugins before it checks the pipeline; every run's Runtime imports
them again where it runs (a worker process or a Ray worker starts without them)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
import sys
from collections.abc import Iterable
from pathlib import Path

from runner.errors import Problem, RunnerError
from runner.paths import OK, refusal, resolve_inside
from runner.yamlpos import Located

MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def resolve_plugin(entry: str, project_dir: Path) -> str:
    """The module name as written, or the file's real path (RunnerError saying why it cannot be one)."""
    if not entry.endswith(".py") and MODULE_NAME.match(entry):
        return entry
    if not entry.endswith(".py"):
        raise RunnerError(f"'{entry}' is neither a module name (my_package.steps) nor a .py file")
    found, status = resolve_inside(project_dir, entry)
    if found is None or status != OK:
        raise RunnerError(refusal(status, entry, project_dir, "project"))
    return str(found)


def import_plugin(spec: str) -> None:
    """Import a resolved plugin (a module name, or a file's real path) once per process."""
    if not spec.endswith(".py"):
        try:
            importlib.import_module(spec)
        except ModuleNotFoundError as exc:
            if exc.name and (spec == exc.name or spec.startswith(exc.name + ".")):
                raise RunnerError(f"no module named '{spec}' (install its package, or name a .py file inside "
                                  f"the project)") from None
            raise
        return
    name = f"runner_plugin_{Path(spec).stem}_{hashlib.sha256(spec.encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return
    found = importlib.util.spec_from_file_location(name, spec)
    if found is None or found.loader is None:
        raise RunnerError(f"{spec}: cannot be imported as a module")
    module = importlib.util.module_from_spec(found)
    sys.modules[name] = module
    try:
        found.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise


def load_plugins(specs: Iterable[str]) -> None:
    """Import resolved plugins (a Runtime does, in every process a run uses), after every
    built-in, so that a plugin taking a built-in's name is refused here."""
    from runner.inputs import ADAPTERS
    from runner.pipeline.step_catalog import STEPS
    STEPS.load_builtins()
    ADAPTERS.load_builtins()
    for spec in specs:
        try:
            import_plugin(spec)
        except RunnerError:
            raise
        except Exception as exc:        # the plugin's own code failed
            raise RunnerError(f"plugin {spec}: importing it failed: {type(exc).__name__}: {exc}") from None


def plugin_problems(located: Located, project_dir: Path) -> list[Problem]:
    """Import each plugin the pipeline names; each one that cannot be, located at its entry."""
    problems = []
    for index, entry in enumerate(located.data.get("plugins") or []):
        try:
            load_plugins([resolve_plugin(entry, project_dir)])
        except RunnerError as exc:
            problems.append(located.problem(("plugins", index), f"plugin '{entry}': {exc}"))
    return problems
