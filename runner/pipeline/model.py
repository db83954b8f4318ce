"""Typed, frozen view of a validated pipeline.

Each section a run reads (`input:`, `summary:`, `memo:`) is a frozen dataclass with its defaults
written here, once, so no reader spells a key or a default again. `SummarySpec.of` also reads the
copy of `summary:` that run.json keeps (view and eval read old runs through it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.pipeline.probes import Probe
from runner.yamlpos import Located
from runner.yamlpos import Path as DataPath

DEFAULT_ADAPTER = "json"        # what reads --input when the pipeline has no `input:`
ASSESSMENT_KEY = "assessment"   # the assessment text's key, unless `summary.assessment_key` names another


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class InputSpec:
    """`input:`: the adapter that reads `--input`, its options (`with:`), and how records become items."""

    adapter: str = DEFAULT_ADAPTER
    options: dict[str, Any] = field(default_factory=dict)
    explode: str | None = None          # a list field of each record; each element becomes an item
    parent_as: str | None = None        # the name an exploded item sees its parent record under
    namespaces: tuple[str, ...] = ()    # each record is a mapping of these names

    @classmethod
    def of(cls, data: Any) -> InputSpec:
        data = _mapping(data)
        return cls(adapter=str(data.get("adapter") or DEFAULT_ADAPTER), options=dict(_mapping(data.get("with"))),
                   explode=data.get("explode"), parent_as=data.get("parent_as"),
                   namespaces=tuple(data.get("namespaces") or ()))


@dataclass(frozen=True)
class SummarySpec:
    """`summary:`: what summary.json counts and computes, and what an item must meet to pass."""

    count_by: str | None = None
    rates: Mapping[str, str] = field(default_factory=dict)            # name: expression over `result`
    fields: Mapping[str, Any] = field(default_factory=dict)           # name: expression over the results
    assessment: tuple[Mapping[str, Any], ...] = ()                    # {when, text} rules, first true wins
    assessment_key: str = ASSESSMENT_KEY
    report_columns: list[str] | None = None
    pass_when: str | None = None
    reason_field: str | None = None

    @classmethod
    def of(cls, data: Any) -> SummarySpec:
        """The spec of a `summary:` mapping (a pipeline's, or run.json's copy); defaults for what is absent."""
        data = _mapping(data)
        columns = data.get("report_columns")
        rates = {str(name): str(expression) for name, expression in _mapping(data.get("rates")).items()}
        rules = data.get("assessment") if isinstance(data.get("assessment"), list) else []
        return cls(count_by=_text(data.get("count_by")), rates=rates,
                   fields=dict(_mapping(data.get("fields"))),
                   assessment=tuple(rule for rule in rules if isinstance(rule, Mapping)),
                   assessment_key=str(data.get("assessment_key", ASSESSMENT_KEY)),
                   report_columns=list(columns) if isinstance(columns, list) else None,
                   pass_when=_text(data.get("pass_when")), reason_field=_text(data.get("reason_field")))


@dataclass(frozen=True)
class MemoSpec:
    """`memo:`: reuse of results across runs, keyed by a rendered content key."""

    key: str
    store: str | None = None            # JSON file under the output directory (memo.json when absent)
    skip_when: str | None = None        # expression over `result`: results not to store
    refresh: tuple[str, ...] = ()       # output fields rendered again for a reused result

    @classmethod
    def of(cls, data: Any) -> MemoSpec | None:
        if not isinstance(data, Mapping):
            return None
        return cls(key=str(data["key"]), store=data.get("store"), skip_when=data.get("skip_when"),
                   refresh=tuple(data.get("refresh") or ()))


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
    input: InputSpec
    params: dict[str, Any]
    models: dict[str, dict[str, Any]]
    steps: tuple[StepSpec, ...]
    output: dict[str, Any]
    output_base: str | None
    summary: SummarySpec
    memo: MemoSpec | None
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
        """The input adapter that reads `--input` (its options are `input.options`)."""
        return self.input.adapter

    @property
    def prompts_dir(self) -> Path:
        return self.project_dir / "prompts"

    @property
    def schemas_dir(self) -> Path:
        return self.project_dir / "schemas"

    def where(self, path: DataPath) -> str:
        """`file:line:col: json.path` for messages about a field."""
        return self.located.describe(path)
