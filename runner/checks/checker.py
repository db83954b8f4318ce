"""The checks a pipeline's data gets once its schema holds (runner/checks/__init__.py lists them),
each problem one located Problem, all reported at once; the loader runs them on every pipeline
not already found valid."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jinja2

import runner.templating.sandbox as templating
from runner.checks.expressions import CONDITION_KEYS, ExpressionChecks, free_names, mentioned_in, result_field_problems
from runner.checks.json_schema import TEMPLATE_TOO, leaves, not_a_schema, read_schema, schema_problems
from runner.checks.result_shapes import ShapeContext, step_shape
from runner.checks.semantics import disabled_models_problem, foreach_problem, quorum_problem, zero_temperature_repeats
from runner.checks.static_values import param_read, rendered_forms, verdicts_of
from runner.errors import InputError, Problem, unknown
from runner.fileio import read_json, read_text
from runner.paths import FILE_NOT_FOUND, refusal, resolve_inside
from runner.pipeline.examples import EXAMPLE_STEPS
from runner.pipeline.files import display
from runner.pipeline.model import DEFAULT_ADAPTER, Pipeline
from runner.pipeline.probes import probe_problems
from runner.pipeline.step_catalog import StepInfo, StepInfos
from runner.text.perturb import with_path
from runner.yamlpos import Located
from runner.yamlpos import Path as DataPath

BASE_NAMES = {"item", "params", "steps", "env", "run"}
SUMMARY_NAMES = {"result", "results", "counts", "total"}   # `result` in a rate; the others once every result is in
OUTPUT_NAMES = {"duration_ms", "llm_calls"}   # the item's run time and LLM calls, known once its steps are done


class Checker(ExpressionChecks):
    """Static checks that need more than the schema."""

    def __init__(self, located: Located, infos: Mapping[str, StepInfo], project_dir: Path):
        self.prompts_dir = project_dir / "prompts"
        super().__init__(located, templating.make_environment(self.prompts_dir))
        self.infos = infos
        self.schemas_dir = project_dir / "schemas"
        self.models = self.data.get("models", {})
        self.step_data: dict[str, dict[str, Any]] = {}
        self.results: dict[str, dict[str, Any]] = {}
        self.shapes = ShapeContext(self.schemas_dir, self._sub_results)

    def run(self) -> list[Problem]:
        self.collect_ids(self.data["steps"], ("steps",))
        item_input = self.data.get("input", {})
        self._input_names(item_input)
        parent = {item_input["parent_as"]} if "parent_as" in item_input else set()
        base = set(BASE_NAMES) | parent | ({"inputs"} if "inputs" in self.data else set())   # a part reads its inputs
        self._check_adapter(item_input)
        for name, spec in self.models.items():
            self._check_model(name, spec, base - {"steps", "item"} | parent)
        base |= set(item_input.get("namespaces", []))     # every item's names
        if "concurrency" in self.data:
            self.strings(self.data["concurrency"], ("concurrency",), {"params", "env"}, set())
        self._check_steps(self.data["steps"], ("steps",), base, set())
        every_step = set(self.all_ids)
        for key in ("output", "output_base"):
            if key in self.data:
                self.strings(self.data[key], (key,), base | OUTPUT_NAMES, every_step)
        if "summary" in self.data:
            self._check_summary(self.data["summary"])
        if self.data.get("memo"):
            self._check_memo(self.data["memo"], base - {"steps"}, base | {"result"}, every_step)
        if self.data.get("tracing"):
            self._check_tracing(self.data["tracing"])
        verdicts = verdicts_of(self.data, self.resolver)
        for where, message in [*result_field_problems(self.data), *zero_temperature_repeats(self.data),
                               *probe_problems(self.data, self.all_ids, self.result_shape, verdicts)]:
            self.add(where, message)
        return self.problems + list(self.needs.values())

    def _input_names(self, item_input: dict[str, Any]) -> None:
        """`parent_as` and `namespaces` add names to every template's scope: one named as a name
        runner gives (`params`, `steps`..., and `item` but as a namespace, which is the item)
        would hide it, and `parent_as` names the record an exploded item comes from, so it needs
        `explode`."""
        named: list[tuple[DataPath, Any]] = [(("input", "parent_as"), item_input.get("parent_as"))]
        named += [(("input", "namespaces", i), name) for i, name in enumerate(item_input.get("namespaces") or [])
                  if name != "item"]        # a row's `item` namespace is the item (OpenAI Evals' rows)
        for where, name in named:
            if name in BASE_NAMES | OUTPUT_NAMES:
                self.add(where, f"'{name}' would hide the {name} templates read: name it otherwise")
        if "parent_as" in item_input and "explode" not in item_input:
            self.add(("input", "parent_as"), "parent_as names the record an item is exploded from: add explode: "
                                             "FIELD (the list each item is one element of), or remove parent_as",
                     key=True)

    def _check_model(self, name: str, spec: dict[str, Any], names: set[str]) -> None:
        """A model's templates; one disabled in the file needs no variable, one enabled by a
        test of a variable does not need that variable."""
        enabled = spec.get("enabled", True)
        self.env_guards = set(self.env_names) if enabled is False else mentioned_in(enabled)
        self.strings(spec, ("models", name), names, set())
        self.env_guards = set()

    def _check_summary(self, summary: dict[str, Any]) -> None:
        """Each part in its own scope: a rate or `pass_when` sees one result; `fields` see the
        counts, the rates and the fields before them; assessment rules see all of those."""
        one_result = {"params", "env", "run", "result"}
        self._summary_names(summary)
        for name, expression in (summary.get("rates") or {}).items():
            self.strings(expression, ("summary", "rates", name), one_result, set(), bare=True)
        if "pass_when" in summary:
            self.strings(summary["pass_when"], ("summary", "pass_when"), one_result, set(), bare=True)
        computed = {"params", "env", "run", "errors"} | SUMMARY_NAMES - {"result"}
        computed |= set(summary.get("rates") or {}) | {f"{name}_count" for name in summary.get("rates") or {}}
        for name, expression in (summary.get("fields") or {}).items():
            self.strings(expression, ("summary", "fields", name), computed, set())
            computed.add(name)
        self.strings(summary.get("assessment"), ("summary", "assessment"), computed, set())

    def _summary_names(self, summary: dict[str, Any]) -> None:
        """A rate or field is a key of summary.json beside runner's own (`total`, `errors`, each
        rate's NAME_count and NAME_reason): one named as those would replace them (a run whose
        every item errored said "errors: 0")."""
        taken = set(summary_keys())
        for kind in ("rates", "fields"):
            for name in summary.get(kind) or {}:
                written = [name, f"{name}_count", f"{name}_reason"] if kind == "rates" else [name]
                clash = next((key for key in written if key in taken), None)
                if clash is not None:
                    self.add(("summary", kind, name), f"'{name}' would replace summary.json's own '{clash}' "
                                                      "(runner writes it): name it otherwise", key=True)
                taken.update(written)

    def _check_memo(self, memo: dict[str, Any], before: set[str], after: set[str], every_step: set[str]) -> None:
        """The key is computed before any step runs; `skip_when` sees the finished result."""
        self.strings(memo.get("key"), ("memo", "key"), before, set())
        key = memo.get("key")
        try:
            read = free_names(templating.parse_source(key, False)) if isinstance(key, str) else None
        except jinja2.TemplateSyntaxError:
            read = None                                 # said by the template checks
        included = isinstance(key, str) and "{%" in key          # what an included template reads is not seen
        if read is not None and not included and read <= before and not read & (before - {"params", "env", "run"}):
            self.add(("memo", "key"), "the key reads nothing of the item, so every item would get the first "
                                      "one's stored result: make it read the item's content, e.g. "
                                      "\"{{ item.text | sha256 }}\"")
        self.strings(memo.get("store"), ("memo", "store"), {"params", "env"}, set())
        self.strings(memo.get("skip_when"), ("memo", "skip_when"), after, every_step, bare=True)
        for index, name in enumerate(memo.get("refresh") or []):
            self._output_field(("memo", "refresh", index), name, open_fields=False)

    def _check_tracing(self, tracing: dict[str, Any]) -> None:
        self.strings(tracing.get("experiment"), ("tracing", "experiment"), {"params", "env", "run"}, set())
        for i, name in enumerate(tracing.get("assessments") or []):
            self._output_field(("tracing", "assessments", i), name)
        if tracing.get("rationale"):
            self._output_field(("tracing", "rationale"), tracing["rationale"])

    def _output_field(self, where: DataPath, name: str, open_fields: bool = True) -> None:
        """`name` is one of the output fields (or any name, when `open_fields` and output_base opens them)."""
        if name not in self.output_fields and not (open_fields and "output_base" in self.data):
            self.add(where, unknown("output field", name, self.output_fields, "output fields"))

    def _check_adapter(self, item_input: dict[str, Any]) -> None:
        from runner.inputs import ADAPTERS, options_schema
        adapter = item_input.get("adapter", DEFAULT_ADAPTER)
        if adapter not in ADAPTERS:
            self.add(("input", "adapter"), unknown("input adapter", adapter, ADAPTERS.names()))
            return
        schema = options_schema(adapter)
        options = item_input.get("with")
        if schema is not None and options is not None:
            self.problems += schema_problems(self.located, options, schema, ("input", "with"))

    def collect_ids(self, steps: list[dict[str, Any]], base: DataPath) -> None:
        for i, step in enumerate(steps):
            step_id = step["id"]
            if step_id in self.all_ids:
                first = self.located.location(self.all_ids[step_id])
                self.add((*base, i, "id"), f"duplicate step id '{step_id}' (first at {first})")
            else:
                self.all_ids[step_id] = (*base, i, "id")
                self.step_data[step_id] = step
            options = step.get("with")     # a step's options are checked against its type's schema later
            nested = options.get("steps") if isinstance(options, dict) else None
            if isinstance(nested, list) and step.get("uses") in self.infos and \
                    self.infos[step["uses"]].substeps:
                self.collect_ids([s for s in nested if isinstance(s, dict) and isinstance(s.get("id"), str)],
                                  (*base, i, "with", "steps"))

    def _check_steps(self, steps: list[dict[str, Any]], base: DataPath, names: set[str],
                     visible: set[str]) -> None:
        seen = set(visible)
        for i, step in enumerate(steps):
            path = (*base, i)
            info = self.infos.get(step["uses"])
            if info is None:
                self.add((*path, "uses"), unknown("step type", step["uses"], self.infos))
            else:
                args = step.get("with", {}) or {}
                problems = schema_problems(self.located, args, info.schema, (*path, "with"))
                problems = problems or self._param_values(args, info, (*path, "with"))
                self.problems.extend(problems)
                if not problems:
                    around = self.env_guards
                    self.env_guards = around | mentioned_in(step.get("if"))
                    self._check_step(step, info, args, path, names, seen)
                    self.env_guards = around
            seen.add(step["id"])

    def _param_values(self, args: dict[str, Any], info: StepInfo, path: DataPath) -> list[Problem]:
        """`with:` checked again with each value that is exactly one params read (`threshold:
        "{{ params.s }}"`) as the param's value: one the step cannot take in any form the
        rendering gives it (the value, its text, a number its text reads as) would fail every
        item (s: abc). A null param is a placeholder for `--set`, not checked."""
        problems: list[Problem] = []
        for where, name, value in _param_reads(args, self.params, info.substeps):
            tried = [schema_problems(self.located, with_path(args, [str(p) for p in where], form), info.schema, path)
                     for form in rendered_forms(value)]
            if tried and all(tried):
                problems += [dataclasses.replace(p, message=f"with {name} as given: "
                                                            f"{p.message.replace(TEMPLATE_TOO, '')}") for p in tried[0]]
        return problems

    def _check_step(self, step: dict[str, Any], info: StepInfo, args: dict[str, Any], path: DataPath,
                    names: set[str], seen: set[str]) -> None:
        nested = args.get("steps") if info.substeps else None
        own_args = {k: v for k, v in args.items() if k != "steps"} if info.substeps else args
        step_names = names | ({"error"} if step.get("on_error") == "default" else set())
        sub_names = names | set(info.sub_scope) | ({args["as"]} if isinstance(args.get("as"), str) else set())
        # A sub-step container's lazy fields (a loop's until, an output) may read its sub-steps.
        inner_visible = seen | {s["id"] for s in (nested or [])} if info.substeps else seen
        for key, value in own_args.items():
            if key == "examples" and info.name in EXAMPLE_STEPS:
                continue                # data, not templates (runner/pipeline/examples.py)
            lazy = info.substeps and key in info.lazy_fields
            self.strings(value, (*path, "with", key), sub_names if lazy else names | set(info.own_scope),
                         inner_visible if lazy else seen, bare=key in CONDITION_KEYS)
        if "if" in step:
            self.strings(step["if"], (*path, "if"), names, seen, bare=True)
        if "default" in step:
            self.strings(step["default"], (*path, "default"), step_names, seen)
        if step.get("on_error") == "default" and "default" not in step:
            self.add((*path, "on_error"), "on_error: default needs a `default:` value")
        if "default" in step and step.get("on_error") != "default":
            self.add((*path, "default"), "a `default:` value is given only by `on_error: default` (the step's "
                                         "error then gives it): add on_error: default, or remove default", key=True)
        self._check_named_things(info, args, path, names, seen)
        for where, message in info.static_problems(args, self.shapes):
            self.add((*path, "with", *where), message)
        if nested:
            self._check_steps(nested, (*path, "with", "steps"), sub_names, seen)

    def _check_named_things(self, info: StepInfo, args: dict[str, Any], path: DataPath,
                            names: set[str], seen: set[str]) -> None:
        """The models, prompt files and schema files a step names, and what its arguments mean:
        its models all disabled, a quorum no jury can reach, a foreach over a single value
        (runner/checks/semantics.py)."""
        for key in info.model_fields:
            entries = _names_in(args.get(key))
            for at, name in entries:
                if name not in self.models:
                    self.add((*path, "with", key, *at), unknown("model", name, self.models, "defined"))
            named = [name for _, name in entries]
            for at, problem in (((key,), disabled_models_problem(named, self.models, info.name)),
                                (("vote", "quorum"), quorum_problem(args.get("vote"), named))):
                if problem:
                    self.add((*path, "with", *at), problem)
        if info.substeps and "items" in args:
            problem = foreach_problem(args["items"], self.resolver, names)
            if problem:
                self.add((*path, "with", "items"), problem)
        for key in info.template_fields:
            for where, value in _template_texts(args.get(key), (*path, "with", key)):
                if isinstance(value, str) and not templating.is_template(value) and value.endswith(".j2"):
                    self._check_prompt_file(value, where, names, seen)
        for key in info.schema_fields:
            value = args.get(key)
            if isinstance(value, str) and not templating.is_template(value):
                self._check_schema_file(value, (*path, "with", key))
            elif isinstance(value, dict) and not any(map(templating.is_template, leaves(value))):   # made at run time
                error = not_a_schema(value)
                if error is not None:
                    self.add((*path, "with", key), f"not a valid JSON Schema: {error}")

    def _check_prompt_file(self, name: str, path: DataPath, names: set[str], seen: set[str]) -> None:
        found, status = resolve_inside(self.prompts_dir, name)      # as the run's loader finds it
        if found is None:
            why = refusal(status, name, self.prompts_dir, "prompts")
            self.add(path, f"prompt template '{name}' not found ({display(self.prompts_dir / name)})"
                     if status == FILE_NOT_FOUND else f"prompt template {why}")
            return
        try:
            tree = templating.parse_source(read_text(found), False)
        except InputError as exc:         # not UTF-8 (the line and byte), or past the size runner reads
            self.add(path, f"prompt template '{name}': {exc}")
            return
        except jinja2.TemplateSyntaxError as exc:
            self.add(path, f"prompt template '{name}' line {exc.lineno}: {exc.message}")
            return
        self.tree(tree, path, names, seen, f"prompt template '{name}': ")

    def _check_schema_file(self, name: str, path: DataPath) -> None:
        file = self.schemas_dir / name
        found, status = resolve_inside(self.schemas_dir, name)
        if found is None:
            self.add(path, f"schema '{name}' not found ({display(file)})" if status == FILE_NOT_FOUND
                     else refusal(status, name, self.schemas_dir, "schemas"))
            return
        try:
            error = not_a_schema(read_json(found, strict=True))
        except InputError as exc:
            self.add(path, f"schema '{name}': {exc}")
            return
        if error is not None:
            self.add(path, f"schema '{name}' is not a valid JSON Schema: {error}")

    def result_shape(self, step_id: str) -> dict[str, Any]:
        """The JSON Schema of a step's result, as its `with:`, on_error and default shape it."""
        if step_id not in self.results:
            step = self.step_data[step_id]
            info = self.infos.get(step["uses"])
            self.results[step_id] = step_shape(info.result_schema if info else None, step.get("with") or {},
                                               step.get("on_error"), step.get("default"), self.shapes)
        return self.results[step_id]

    def _sub_results(self, steps: list[Any]) -> dict[str, Any]:
        return {s["id"]: self.result_shape(s["id"]) for s in steps
                if isinstance(s, dict) and s.get("id") in self.step_data}


def _param_reads(args: dict[str, Any], params: dict[str, Any], substeps: bool) -> Iterator[tuple[DataPath, str, Any]]:
    """(place under `with:`, `params.NAME`, its value) of each value that is exactly one params
    read, but in sub-steps (checked as steps of their own)."""
    def walk(value: Any, where: DataPath) -> Iterator[tuple[DataPath, str, Any]]:
        if isinstance(value, (dict, list)):
            for key, inner in value.items() if isinstance(value, dict) else enumerate(value):
                if not (substeps and where == () and key == "steps"):
                    yield from walk(inner, (*where, key))
        elif (found := param_read(value, params)) is not None:
            yield where, found[0], found[1]
    return walk(args, ())


@functools.cache
def summary_keys() -> frozenset[str]:
    """What runner writes in summary.json itself (its schema's keys; `juries` as agreement writes
    it), read when a summary is checked, not at every start."""
    return frozenset({*read_schema("summary.schema.json")["properties"], "juries"})


def verdict_values(pipeline: Pipeline) -> list[str] | None:
    """The values a pipeline's verdict (the `summary.count_by` output field) can take, when they are
    few and known before the run: an answer schema's enum (with a jury's on_tie and on_all_failed),
    a decide step's literal verdicts, a conditional's literals; None when open. Feedback checks a
    label against them (runner/stores/reviews.py); run.json keeps them (`pipeline.verdicts`)."""
    checker = Checker(pipeline.located, StepInfos(), pipeline.project_dir)
    checker.collect_ids(pipeline.located.data["steps"], ("steps",))
    return verdicts_of(pipeline.located.data, checker.resolver)


def _template_texts(value: Any, path: DataPath) -> Iterator[tuple[DataPath, Any]]:
    """A prompt field's texts: itself, or each message's `content` (an llm step's `messages`)."""
    if not isinstance(value, list):
        return iter([(path, value)])
    return (((*path, i, "content"), m.get("content")) for i, m in enumerate(value) if isinstance(m, dict))


def _names_in(value: Any) -> list[tuple[DataPath, str]]:
    entries = [((i,), v) for i, v in enumerate(value)] if isinstance(value, list) else [((), value)]
    return [(at, name) for at, name in entries if isinstance(name, str) and not templating.is_template(name)]
