"""Pipeline file -> validated, typed Pipeline. Every problem is reported at once.

The loader only loads data: it checks the file against the schemas, checks references
between steps, models, params, env vars, prompt and schema files, and knows nothing of
what a step does beyond the StepInfo the catalog gives it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jinja2

import runner.pipeline.templating as templating
from runner.errors import ConfigError, InputError, Problem, did_you_mean, unknown
from runner.fileio import read_json
from runner.paths import FILE_NOT_FOUND, refusal, resolve_inside
from runner.pipeline.catalog import StepCatalog, StepInfo
from runner.pipeline.extends import expand
from runner.pipeline.files import display, read_located
from runner.pipeline.model import Pipeline, StepSpec
from runner.pipeline.overrides import apply_overrides
from runner.pipeline.param_types import param_problems
from runner.pipeline.plugins import plugin_problems, plugin_specs
from runner.pipeline.result_shapes import OPEN, ShapeContext, check_read, closed, literal_shape, step_field_reads, union
from runner.pipeline.schema_check import pipeline_schema, schema_problems
from runner.pipeline.template_checks import referenced_templates, result_field_problems, unknown_callables
from runner.pipeline.validated import ValidatedPipelines
from runner.yamlpos import Located
from runner.yamlpos import Path as DataPath

BASE_NAMES = {"item", "params", "steps", "env", "run"}
SUMMARY_NAMES = {"result", "results", "counts", "total"}
OUTPUT_NAMES = {"duration_ms"}   # the item's run time, known once its steps are done
CONDITION_KEYS = {"if", "when", "until"}


def load_pipeline(path: str | Path, overrides: list[str] | None = None,
                  catalog: StepCatalog | None = None, validated: ValidatedPipelines | None = None) -> Pipeline:
    """The typed pipeline, or ConfigError with every problem. With `validated` (runs and
    renders), a pipeline already found valid as it is now skips the checks."""
    file = Path(path)
    located = read_located(file)
    if not isinstance(located.data, dict):
        raise ConfigError([located.problem((), "a pipeline file must be a mapping "
                                               "(version, name, steps, ...)")])
    project_dir = file.resolve().parent.parent
    located, sources = expand(located, file, project_dir)
    # A custom catalog's checks are its own; a pipeline's plugins are code that may change what
    # is valid without the pipeline changing: such pipelines are checked every time.
    memo = validated if catalog is None and not located.data.get("plugins") else None
    catalog = catalog or StepCatalog.builtin()
    if overrides:
        apply_overrides(located, overrides, pipeline_schema(), catalog)
    fingerprint = memo.fingerprint(located.data, file, project_dir, sources) if memo else ""
    if memo and memo.known(fingerprint):
        return _build(located, file, project_dir, sources)
    problems = schema_problems(located, located.data, pipeline_schema())
    if not problems:         # the plugins' step types, adapters and filters, before anything is checked
        problems = plugin_problems(located, project_dir)
    if not problems:
        problems = _Checker(located, catalog, project_dir).run() + param_problems(located)
    if problems:
        raise ConfigError(problems)
    if memo:
        memo.remember(fingerprint)
    return _build(located, file, project_dir, sources)


def _build(located: Located, file: Path, project_dir: Path, sources: list[Path]) -> Pipeline:
    data = located.data
    return Pipeline(
        name=data["name"], description=data.get("description", ""), file=file, project_dir=project_dir,
        env_names=tuple(data.get("env", [])), input=data.get("input", {"adapter": "json"}),
        params=data.get("params", {}), models=data.get("models", {}),
        steps=tuple(_step_specs(list(data["steps"]), ("steps",))), output=data.get("output", {}),
        output_base=data.get("output_base"), summary=data.get("summary", {}), memo=data.get("memo"),
        concurrency=data.get("concurrency", 8),
        located=located, tracing=data.get("tracing"), sources=tuple(sources),
        plugins=plugin_specs(data, project_dir))


def _step_specs(steps: list[dict[str, Any]], base: DataPath) -> Iterator[StepSpec]:
    for i, step in enumerate(steps):
        args = step.get("with", {}) or {}
        nested: list[dict[str, Any]] = args["steps"] if isinstance(args.get("steps"), list) else []
        yield StepSpec(id=step["id"], uses=step["uses"], args=args, path=(*base, i),
                       condition=step.get("if"), on_error=step.get("on_error", "fail"),
                       default=step.get("default"),
                       substeps=tuple(_step_specs(nested, (*base, i, "with", "steps"))))


class _Checker:
    """Static checks that need more than the schema."""

    def __init__(self, located: Located, catalog: StepCatalog, project_dir: Path):
        self.located = located
        self.catalog = catalog
        self.data: dict[str, Any] = located.data
        self.prompts_dir = project_dir / "prompts"
        self.schemas_dir = project_dir / "schemas"
        self.problems: list[Problem] = []
        self.params = self.data.get("params", {}) or {}
        self.models = self.data.get("models", {}) or {}
        self.env_names = set(self.data.get("env", []) or [])
        self.all_ids: dict[str, DataPath] = {}
        self.step_data: dict[str, dict[str, Any]] = {}
        self.results: dict[str, dict[str, Any]] = {}
        self.shapes = ShapeContext(self.schemas_dir, self._sub_results)
        self.prompt_env = templating.make_environment(self.prompts_dir)

    def add(self, path: DataPath, message: str, *, key: bool = False) -> None:
        self.problems.append(self.located.problem(path, message, key=key))

    def run(self) -> list[Problem]:
        self._collect_ids(self.data["steps"], ("steps",))
        base = set(BASE_NAMES)
        parent_as = (self.data.get("input") or {}).get("parent_as")
        if parent_as:
            base.add(parent_as)
        self._check_adapter()
        for name, spec in self.models.items():
            model_names = base - {"steps", "item"} | ({parent_as} if parent_as else set())
            self._check_strings(spec, ("models", name), model_names, set())
        if "concurrency" in self.data:
            self._check_strings(self.data["concurrency"], ("concurrency",), {"params", "env"}, set())
        self._check_steps(self.data["steps"], ("steps",), base, set())
        every_step = set(self.all_ids)
        for key in ("output", "output_base"):
            if key in self.data:
                self._check_strings(self.data[key], (key,), base | OUTPUT_NAMES, every_step)
        if "summary" in self.data:
            summary = self.data["summary"]
            computed = set(summary.get("rates") or {}) | set(summary.get("fields") or {})
            computed |= {f"{name}_count" for name in summary.get("rates") or {}}
            self._check_strings(summary, ("summary",), {"params", "env", "run", "errors"} | SUMMARY_NAMES | computed,
                                set())
            if "pass_when" in summary:                     # a bare expression over one result
                self._check_strings(summary["pass_when"], ("summary", "pass_when"), {"params", "env", "result"},
                                    set(), bare=True)
        for where, message in result_field_problems(self.data):
            self.add(where, message)
        if self.data.get("memo"):
            self._check_strings(self.data["memo"], ("memo",), base | {"result"}, set())
            for index, name in enumerate(self.data["memo"].get("refresh") or []):
                if name not in (self.data.get("output") or {}):
                    self.add(("memo", "refresh", index), unknown("output field", name, self.data.get("output") or {},
                                                                  "output fields"))
        if self.data.get("tracing"):
            self._check_tracing(self.data["tracing"])
        return self.problems

    def _check_tracing(self, tracing: dict[str, Any]) -> None:
        self._check_strings(tracing.get("experiment"), ("tracing", "experiment"), {"params", "env", "run"}, set())
        output = self.data.get("output") or {}
        named: list[tuple[DataPath, str]] = [(("tracing", "assessments", i), name)
                                             for i, name in enumerate(tracing.get("assessments") or [])]
        if tracing.get("rationale"):
            named.append((("tracing", "rationale"), tracing["rationale"]))
        for where, name in named:
            if name not in output and "output_base" not in self.data:
                self.add(where, unknown("output field", name, output, "output fields"))

    def _check_adapter(self) -> None:
        from runner.inputs import ADAPTERS, adapter_names
        adapter = (self.data.get("input") or {}).get("adapter")
        if adapter is not None and adapter not in ADAPTERS:
            self.add(("input", "adapter"), unknown("input adapter", adapter, adapter_names()))
            return
        from runner.inputs import options_schema
        schema = options_schema(adapter or "json")
        options = (self.data.get("input") or {}).get("with")
        if schema is not None and options is not None:
            self.problems += schema_problems(self.located, options, schema, ("input", "with"))

    def _collect_ids(self, steps: list[dict[str, Any]], base: DataPath) -> None:
        for i, step in enumerate(steps):
            step_id = step["id"]
            if step_id in self.all_ids:
                first = self.located.location(self.all_ids[step_id])
                self.add((*base, i, "id"), f"duplicate step id '{step_id}' (first at {first})")
            else:
                self.all_ids[step_id] = (*base, i, "id")
                self.step_data[step_id] = step
            nested = (step.get("with") or {}).get("steps")
            if isinstance(nested, list) and step.get("uses") in self.catalog.infos and \
                    self.catalog.infos[step["uses"]].substeps:
                self._collect_ids([s for s in nested if isinstance(s, dict) and "id" in s],
                                  (*base, i, "with", "steps"))

    def _check_steps(self, steps: list[dict[str, Any]], base: DataPath, names: set[str],
                     visible: set[str]) -> None:
        seen = set(visible)
        for i, step in enumerate(steps):
            path = (*base, i)
            uses = step["uses"]
            info = self.catalog.infos.get(uses)
            if info is None:
                self.add((*path, "uses"), unknown("step type", uses, self.catalog.infos))
                seen.add(step["id"])
                continue
            args = step.get("with", {}) or {}
            problems = schema_problems(self.located, args, info.schema, (*path, "with"))
            self.problems.extend(problems)
            if problems:
                seen.add(step["id"])
                continue
            nested = args.get("steps") if info.substeps else None
            own_args = {k: v for k, v in args.items() if k != "steps"} if info.substeps else args
            step_names = names | ({"error"} if step.get("on_error") == "default" else set())
            sub_names = names | _sub_scope(info, args)
            # A sub-step container's own fields (until, output) may read its sub-steps.
            inner_visible = seen | {s["id"] for s in (nested or [])} if info.substeps else seen
            for key, value in own_args.items():
                if info.substeps and key in ("until", "output"):
                    self._check_strings(value, (*path, "with", key), sub_names, inner_visible,
                                        bare=key in CONDITION_KEYS)
                else:
                    self._check_strings(value, (*path, "with", key), names | set(info.own_scope), seen,
                                        bare=key in CONDITION_KEYS)
            if "if" in step:
                self._check_strings(step["if"], (*path, "if"), names, seen, bare=True)
            if "default" in step:
                self._check_strings(step["default"], (*path, "default"), step_names, seen)
            if step.get("on_error") == "default" and "default" not in step:
                self.add((*path, "on_error"), "on_error: default needs a `default:` value")
            self._check_named_things(info, args, path, names, seen)
            for where, message in info.static_problems(args, self.shapes):
                self.add((*path, "with", *where), message)
            if nested:
                self._check_steps(nested, (*path, "with", "steps"), sub_names, seen)
            seen.add(step["id"])

    def _check_named_things(self, info: StepInfo, args: dict[str, Any], path: DataPath,
                            names: set[str], seen: set[str]) -> None:
        for key in info.model_fields:
            value = args.get(key)
            for index, name in _names_in(value):
                where = (*path, "with", key) + ((index,) if index is not None else ())
                if name not in self.models:
                    self.add(where, unknown("model", name, self.models, "defined"))
        for key in info.template_fields:
            value = args.get(key)
            if isinstance(value, str) and not templating.is_template(value) and value.endswith(".j2"):
                self._check_prompt_file(value, (*path, "with", key), names, seen)
        for key in info.schema_fields:
            value = args.get(key)
            if isinstance(value, str) and not templating.is_template(value):
                self._check_schema_file(value, (*path, "with", key))

    def _check_prompt_file(self, name: str, path: DataPath, names: set[str], seen: set[str]) -> None:
        file = self.prompts_dir / name
        if not file.is_file():
            self.add(path, f"prompt template '{name}' not found ({display(file)})")
            return
        try:
            source = file.read_text(encoding="utf-8")
            tree = self.prompt_env.parse(source)
        except jinja2.TemplateSyntaxError as exc:
            self.add(path, f"prompt template '{name}' line {exc.lineno}: {exc.message}")
            return
        self._check_tree(tree, path, names, seen, f"prompt template '{name}': ")

    def _check_schema_file(self, name: str, path: DataPath) -> None:
        file = self.schemas_dir / name
        found, status = resolve_inside(self.schemas_dir, name)
        if found is None:
            self.add(path, f"schema '{name}' not found ({display(file)})" if status == FILE_NOT_FOUND
                     else refusal(status, name, self.schemas_dir, "schemas"))
            return
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError
        try:
            Draft202012Validator.check_schema(read_json(found))
        except InputError as exc:
            self.add(path, f"schema '{name}': {exc}")
        except SchemaError as exc:
            self.add(path, f"schema '{name}' is not a valid JSON Schema: {exc.message}")

    def _check_strings(self, value: Any, path: DataPath, names: set[str], seen: set[str],
                       bare: bool = False) -> None:
        if isinstance(value, dict):
            for key, child in value.items():
                self._check_strings(child, (*path, key), names, seen, bare=key in CONDITION_KEYS)
            return
        if isinstance(value, list):
            for index, child in enumerate(value):
                self._check_strings(child, (*path, index), names, seen)
            return
        if not isinstance(value, str):
            return
        as_bare = bare and not templating.is_template(value)
        if not as_bare and not templating.is_template(value):
            return
        try:
            tree = templating.parse_source(value, as_bare)
        except jinja2.TemplateSyntaxError as exc:
            self.add(path, f"template syntax error: {exc.message}")
            return
        self._check_tree(tree, path, names, seen, "")

    def _check_tree(self, tree: Any, path: DataPath, names: set[str], seen: set[str], prefix: str,
                    chain: tuple[str, ...] = ()) -> None:
        at = (lambda line: f"{prefix}line {line}: ") if prefix else (lambda line: "")
        unknowns = list(unknown_callables(tree, self.prompt_env))
        for line, message in unknowns:
            self.add(path, at(line) + message)
        for named in referenced_templates(tree, self.prompt_env):
            where = f"{at(named.line) or prefix}{named.keyword} '{named.name}': "
            if named.problem is not None:
                self.add(path, where + named.problem)
            elif named.tree is not None and named.name not in chain:
                self._check_tree(named.tree, path, names if named.shares_context else set(), seen, where,
                                 (*chain, named.name))
        known_globals = set(self.prompt_env.globals)
        try:
            free = templating.free_names(tree)
        except jinja2.TemplateSyntaxError as exc:     # Jinja's own compile-time checks
            if not unknowns:
                self.add(path, f"{prefix}template error: {exc.message}")
            free = set()
        for name in sorted(free - names - known_globals):
            hint = did_you_mean(name, names)
            self.add(path, f"{prefix}undefined name '{name}'.{hint}" if hint else
                     f"{prefix}undefined name '{name}' (in scope: {', '.join(sorted(names))})")
        if "steps" in names:
            for ref, _ in templating.attribute_refs(tree, "steps"):
                if ref in seen:
                    continue
                if ref in self.all_ids:
                    where = self.located.location(self.all_ids[ref])
                    self.add(path, f"{prefix}steps.{ref} refers to a step that has not run yet "
                                   f"(step '{ref}' at {where} runs later)")
                else:
                    hint = did_you_mean(ref, seen)
                    self.add(path, f"{prefix}steps.{ref}: no earlier step has id '{ref}'.{hint}" if hint else
                             f"{prefix}steps.{ref}: no earlier step has id '{ref}'")
            for ref, fields in step_field_reads(tree):
                problem = check_read(ref, self.result_shape(ref), fields) if ref in seen else None
                if problem:
                    self.add(path, prefix + problem)
        if "params" in names:
            for ref, _ in templating.attribute_refs(tree, "params"):
                if ref not in self.params:
                    self.add(path, prefix + unknown("param", ref, self.params, "params"))
        if "env" in names:
            for ref, _ in templating.attribute_refs(tree, "env"):
                if ref not in self.env_names:
                    self.add(path, f"{prefix}env.{ref} is not declared: add '{ref}' to the pipeline's `env:` list")

    def result_shape(self, step_id: str) -> dict[str, Any]:
        """The JSON Schema of a step's result, as its `with:`, on_error and default shape it."""
        if step_id not in self.results:
            step = self.step_data[step_id]
            info = self.catalog.infos.get(step["uses"])
            args = step.get("with") or {}
            shape = info.result_schema(args, self.shapes) if info and isinstance(args, dict) else OPEN
            if step.get("on_error") == "continue":
                shape = union(shape, closed({"error": {"type": "string"}}))
            elif step.get("on_error") == "default":
                shape = union(shape, literal_shape(step.get("default")))
            self.results[step_id] = shape
        return self.results[step_id]

    def _sub_results(self, steps: list[Any]) -> dict[str, Any]:
        return {s["id"]: self.result_shape(s["id"]) for s in steps
                if isinstance(s, dict) and s.get("id") in self.step_data}


def _sub_scope(info: StepInfo, args: dict[str, Any]) -> set[str]:
    names = set(info.sub_scope)
    if isinstance(args.get("as"), str):
        names.add(args["as"])
    return names


def _names_in(value: Any) -> Iterator[tuple[int | None, str]]:
    if isinstance(value, str) and not templating.is_template(value):
        yield None, value
    elif isinstance(value, list):
        for index, entry in enumerate(value):
            if isinstance(entry, str) and not templating.is_template(entry):
                yield index, entry
