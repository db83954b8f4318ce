"""The pipelines `runner serve` serves: every pipeline file directly in PIPELINES_DIR, loaded
with the server's `--set` and `--model` at the start and again when a pipeline, prompt or
schema file changes; and the params a request may set (its `params_schema`), applied as `--set
params.NAME=VALUE` so the pipeline's hash (which keys stored results) holds them. A param value
naming a path that leaves the project (absolute, `~`, `..`) is refused."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from runner.checks.json_schema import validator_for
from runner.errors import ConfigError, RunnerError, unknown
from runner.pipeline.loader import load_pipeline
from runner.pipeline.model import Pipeline
from runner.pipeline.validated import ValidatedPipelines
from runner.redact import redact
from runner.runs.manifest import strings_in
from runner.runs.reads import input_reads, reads_exploded_list, template_reads
from runner.safetext import clean_value
from runner.serve.http import ApiError

SUFFIXES = (".yaml", ".yml")
DRIVE = re.compile(r"[A-Za-z]:[\\/]")      # a Windows path from a drive's root (C:\\ or C:/)
CHECK_EVERY = 1.0           # seconds between looks for changed pipeline, prompt and schema files


@dataclass
class Served:
    """One served pipeline as its file says it."""

    name: str
    pipeline: Pipeline
    settable: dict[str, Any]            # params_schema: each param a request may set, and its schema
    reads: dict[str, Any] = field(default_factory=dict)     # the input fields it reads
    overrides: list[str] = field(default_factory=list)      # the server's --set and --model, applied first
    list_in_key: bool = False           # an exploded item's key keeps its list (runs/reads.py: reads_exploded_list)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.pipeline.description,
                "file": self.pipeline.file.name, "params": {name: self.pipeline.params.get(name)
                                                            for name in self.settable},
                "params_schema": self.settable, "input": self.reads}


class Catalog:
    def __init__(self, folder: Path, cache_dir: Path, overrides: list[str] | None = None):
        self.overrides = list(overrides or [])      # `runner serve --set/--model`, on every pipeline
        self.folder = folder.resolve()
        self.project = self.folder.parent
        self.cache_dir = cache_dir
        self.served: dict[str, Served] = {}
        self.problems: dict[str, str] = {}          # file name -> why it is not served
        self.generation = 0                         # grows at each reload
        self._signature: tuple[tuple[str, int, int], ...] | None = None
        self._checked = 0.0
        self.refresh(force=True)

    def refresh(self, force: bool = False) -> None:
        """Load the pipelines again when one of their files changed (looked at once a second)."""
        now = time.monotonic()
        if not force and now - self._checked < CHECK_EVERY:
            return
        self._checked = now
        signature = tuple(self._stats())
        if signature == self._signature:
            return
        self._signature = signature
        served: dict[str, Served] = {}
        problems: dict[str, str] = {}
        for path in sorted(self.folder.iterdir()):
            if path.suffix not in SUFFIXES or not path.is_file() or path.resolve().parent != self.folder:
                continue            # only pipeline files directly in the folder, links out of it left out
            try:
                pipeline = load_pipeline(path, self.overrides, validated=ValidatedPipelines(self.cache_dir))
            except RunnerError as exc:
                problems[path.name] = redact(str(exc))
                continue
            if pipeline.name in served:
                problems[path.name] = (f"pipeline name '{pipeline.name}' is also the name of "
                                       f"{served[pipeline.name].pipeline.file.name}: not served")
                continue
            names = template_reads(pipeline)
            served[pipeline.name] = Served(pipeline.name, pipeline, pipeline.params_schema,
                                           input_reads(pipeline, names), self.overrides,
                                           reads_exploded_list(pipeline, names))
        self.served, self.problems = served, problems
        self.generation += 1

    def _stats(self) -> Iterator[tuple[str, int, int]]:
        for root in (self.folder, self.project / "prompts", self.project / "schemas"):
            for folder, _, names in os.walk(root):
                for name in sorted(names):
                    try:
                        info = os.stat(os.path.join(folder, name))
                    except OSError:
                        continue
                    yield os.path.join(folder, name), info.st_mtime_ns, info.st_size

    def get(self, name: str) -> Served:
        self.refresh()
        served = self.served.get(name)
        if served is None:
            raise ApiError(404, unknown("pipeline", name, list(self.served), "served"))
        return served


def request_overrides(served: Served, params: dict[str, Any] | None) -> list[str]:
    """`params.NAME=VALUE` assignments for a request's params, or ApiError(400) naming each param
    a request may not set or whose value leaves the project."""
    problems = []
    params = clean_value(params or {})         # a lone surrogate (JSON's "\\ud800") is no character: U+FFFD
    for name, value in params.items():
        if name not in served.settable:
            problems.append(f"params.{name}: a request may set only the params the pipeline declares "
                            f"under params: ({', '.join(served.settable) or 'none'})")
            continue
        leaving = next(_paths_leaving(value, served.pipeline.project_dir), None)
        wrong = _json_type_problem(value, served.settable[name])
        if wrong:
            problems.append(f"params.{name}: {wrong}")
        elif leaving is not None:
            problems.append(f"params.{name}: {leaving!r} leaves the project (an absolute path, ~, .. or a "
                            "symbolic link out of it): a request reads only files inside it")
    if problems:
        raise ApiError(400, "; ".join(problems))
    return [f"params.{name}={_yaml(value)}" for name, value in params.items()]


def _json_type_problem(value: Any, schema: Any) -> str | None:
    """A request's value of another JSON type than its param declares (an object or 5 for a
    string): `--set` reads a string param's YAML scalar as text, which a typed request is not."""
    declared = schema.get("type") if isinstance(schema, dict) else None
    if declared is None:
        return None
    if validator_for({"type": declared}).is_valid(value):
        return None
    given = "null" if value is None else {bool: "boolean", str: "string", dict: "object", list: "array"}.get(
        type(value), "number")
    return f"a {given} where the param is declared {' or '.join(declared) if isinstance(declared, list) else declared}"


def _yaml(value: Any) -> str:
    """The value as YAML that reads back as exactly this value (--set parses YAML)."""
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=2**31)
    return text.removesuffix("\n...\n").rstrip("\n")


def _paths_leaving(value: Any, project: Path) -> Iterator[str]:
    """Each string of `value`, its objects' keys too (`{"/etc": "passwd"} | dictsort` reads as
    well as a value does), that, as a path from the project, is not inside it: by its text, or
    where a symbolic link in the project takes it (its real path)."""
    inside = Path(os.path.realpath(project))
    for text in strings_in(value, keys=True):
        posix = PurePosixPath(text.replace("\\", "/"))
        if text.startswith(("/", "~")) or ".." in posix.parts or DRIVE.match(text):
            yield text
        elif "\x00" not in text and not Path(os.path.realpath(inside / text)).is_relative_to(inside):
            yield text


def load_variant(served: Served, overrides: list[str], cache_dir: Path) -> Pipeline:
    """The pipeline with a request's params, checked as `--set` is (their schema, NaN): a
    problem is ApiError(400) naming the param (any other RunnerError is a 400 too)."""
    if not overrides:
        return served.pipeline
    try:
        pipeline = load_pipeline(served.pipeline.file, [*served.overrides, *overrides],
                                 validated=ValidatedPipelines(cache_dir))
    except ConfigError as exc:
        raise ApiError(400, "; ".join(f"{p.path}: {p.message}" if p.path else p.message
                                      for p in exc.problems)) from None
    return pipeline
