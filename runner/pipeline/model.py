"""Typed, frozen view of a validated pipeline."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.pipeline.probes import Probe
from runner.yamlpos import Located
from runner.yamlpos import Path as DataPath

DEFAULT_ADAPTER = "json"        # what reads --input when the pipeline has no `input:`


@dataclass(frozen=True)
class StepSpec:
    id: str
    uses: str
    args: dict[str, Any]
    path: DataPath                      # where the step sits in the file, e.g. ('steps', 2)
    condition: Any = None               # `if:`
    on_error: str = "fail"
    default: Any = None
    substeps: tuple[StepSpec, ...] = ()


@dataclass(frozen=True)
class Pipeline:
    name: str
    description: str
    file: Path
    project_dir: Path                   # the folder holding pipelines/, prompts/, schemas/
    env_names: tuple[str, ...]
    input: dict[str, Any]
    params: dict[str, Any]
    models: dict[str, dict[str, Any]]
    steps: tuple[StepSpec, ...]
    output: dict[str, Any]
    output_base: str | None
    summary: dict[str, Any]
    memo: dict[str, Any] | None
    concurrency: Any                    # items in flight, when the pipeline pins them (else None)
    located: Located = field(repr=False, compare=False)
    tracing: dict[str, Any] | None = None
    sources: tuple[Path, ...] = ()      # the files it is made of: itself, then the bases it extends
    plugins: tuple[str, ...] = ()       # `plugins:` resolved: module names and real paths of .py files
    probes: tuple[Probe, ...] = ()      # what `runner probe` measures (runner/pipeline/probes.py)
    parts: dict[str, Pipeline] = field(default_factory=dict, repr=False, compare=False)  # `uses: pipeline` files

    @property
    def params_schema(self) -> dict[str, Any]:
        """Each param's JSON Schema (declared in one block or two), by name."""
        return dict(self.located.data.get("params_schema") or {})

    @property
    def adapter(self) -> str:
        """The input adapter that reads `--input` (its options are `input.with`)."""
        return str(self.input.get("adapter") or DEFAULT_ADAPTER)

    @property
    def prompts_dir(self) -> Path:
        return self.project_dir / "prompts"

    @property
    def schemas_dir(self) -> Path:
        return self.project_dir / "schemas"

    def where(self, path: DataPath) -> str:
        """`file:line:col: json.path` for messages about a field."""
        return self.located.describe(path)
