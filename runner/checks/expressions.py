"""The check of every template and bare expression of a pipeline, in the scope where it sits.

For each: its syntax, the names it reads (with a did-you-mean, `result.X` suggested where a
rate or rule reads a bare output field), `steps.X` reads against earlier steps and their
result shapes, params and declared env names, unknown filters and tests, the templates it
includes, what its comparisons can hold (runner/checks/semantics.py), and the environment
variables it needs that are not set (one message per name). Jinja's parser leaves unknown filter
and test names (also those named as strings, `map('trimm')`) and the templates an `include`,
`import` or `extends` names to the first render: they are found here. Beside them, the result
fields `summary` and `report_columns` read (`result_field_problems`).

A template that reads `env.NAME` needs NAME unless the read is guarded: a `default(...)` on it,
an `is defined` / `is undefined` / `is none` test of it, `'NAME' in env` or `env.get('NAME')`
anywhere in the same template, an `if:` of the step that mentions it, or an `enabled:` of the
model that mentions it (a model disabled when NAME is absent does not need it). A model that is
`enabled: false` needs nothing. `runner validate` runs in CI with no variables set, so only an
unguarded read is a need: it would fail every item."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

import jinja2
from jinja2 import meta, nodes

import runner.templating.sandbox as templating
from runner.checks.result_shapes import check_read, step_field_reads
from runner.checks.semantics import comparison_problems
from runner.checks.static_values import Resolver
from runner.errors import Problem, did_you_mean, unknown
from runner.yamlpos import Located
from runner.yamlpos import Path as DataPath

CONDITION_KEYS = {"if", "when", "until"}
# Filters whose string argument at this position names a filter or a test.
_NAMED_CALLABLES = {"map": (0, "filter"), "select": (0, "test"), "reject": (0, "test"),
                    "selectattr": (1, "test"), "rejectattr": (1, "test")}
# Fields runner adds to an item's result besides the pipeline's output.
RESULT_EXTRAS = frozenset({"index", "error", "warnings", "mlflow_trace_id"})
_KEYWORDS = {nodes.Include: "include", nodes.Import: "import", nodes.FromImport: "import", nodes.Extends: "extends"}
_ENV_TESTS = {"defined", "undefined", "none"}
_DEFAULTS = {"default", "d"}


class ExpressionChecks:
    """The checks of every template and expression of a pipeline in the scope where it sits;
    the Checker (runner/checks/checker.py) is one, and says what each step's result holds."""

    def __init__(self, located: Located, prompt_env: jinja2.Environment):
        self.located = located
        self.data: dict[str, Any] = located.data
        self.prompt_env = prompt_env
        self.params = self.data.get("params", {})
        self.env_names = set(self.data.get("env", []))
        self.all_ids: dict[str, DataPath] = {}
        output = self.data.get("output", {})
        self.output_fields = set(output)
        self.resolver = Resolver(self.params, self.result_shape, output, self.all_ids)
        self.problems: list[Problem] = []
        self.env_guards: set[str] = set()       # env names the enclosing step's `if` or model's `enabled` tests
        self.needs: dict[str, Problem] = {}      # an unset env name a template needs -> its first place

    def add(self, path: DataPath, message: str, *, key: bool = False) -> None:
        self.problems.append(self.located.problem(path, message, key=key))

    def result_shape(self, step_id: str) -> dict[str, Any]:
        raise NotImplementedError

    def strings(self, value: Any, path: DataPath, names: set[str], seen: set[str], bare: bool = False) -> None:
        """Every template in a YAML value (and the value itself as a bare expression when `bare`)."""
        if isinstance(value, (dict, list)):
            for key, child in value.items() if isinstance(value, dict) else enumerate(value):
                self.strings(child, (*path, key), names, seen, bare=key in CONDITION_KEYS)
            return
        if not isinstance(value, str) or not (bare or templating.is_template(value)):
            return
        try:
            tree = templating.parse_source(value, not templating.is_template(value))
        except jinja2.TemplateSyntaxError as exc:
            self.add(path, f"template syntax error: {exc.message}")
            return
        self.tree(tree, path, names, seen, "")

    def tree(self, tree: Any, path: DataPath, names: set[str], seen: set[str], prefix: str,
             chain: tuple[str, ...] = ()) -> None:
        at = (lambda line: f"{prefix}line {line}: ") if prefix else (lambda line: "")
        unknowns = list(unknown_callables(tree, self.prompt_env))
        for line, message in unknowns:
            self.add(path, at(line) + message)
        for node in templating.find_all(tree, tuple(_KEYWORDS)):     # a name built at render time is checked then
            if not (isinstance(node.template, nodes.Const) and isinstance(node.template.value, str)):
                continue
            name, keyword = node.template.value, _KEYWORDS[type(node)]
            where = f"{at(node.lineno) or prefix}{keyword} '{name}': "
            included = included_template(self.prompt_env, name, getattr(node, "ignore_missing", False))
            if isinstance(included, str):
                self.add(path, where + included)
            elif included is not None and name not in chain:
                shares = keyword == "extends" or getattr(node, "with_context", False)
                self.tree(included, path, names if shares else set(), seen, where, (*chain, name))
        try:
            free = free_names(tree)
        except jinja2.TemplateSyntaxError as exc:     # Jinja's own compile-time checks
            if not unknowns:
                self.add(path, f"{prefix}template error: {exc.message}")
            free = frozenset()
        for name in sorted(free - names - set(self.prompt_env.globals)):
            self.add(path, prefix + self._undefined(name, names))
        if "steps" in names:
            self._step_reads(tree, path, seen, prefix)
        if "params" in names:
            for ref in templating.attribute_refs(tree, "params"):
                if ref not in self.params:
                    self.add(path, prefix + unknown("param", ref, self.params, "params"))
        if "env" in names:
            self._env_reads(tree, path, prefix)
        for message in comparison_problems(tree, self.resolver, names):
            self.add(path, prefix + message)

    def _undefined(self, name: str, names: set[str]) -> str:
        if "result" in names and name in self.output_fields:
            return (f"undefined name '{name}' (here each result is `result`; names in scope: "
                    f"{', '.join(sorted(names))}). Did you mean 'result.{name}'?")
        hint = did_you_mean(name, names)
        return f"undefined name '{name}'.{hint}" if hint else \
            f"undefined name '{name}' (in scope: {', '.join(sorted(names))})"

    def _step_reads(self, tree: Any, path: DataPath, seen: set[str], prefix: str) -> None:
        for ref in templating.attribute_refs(tree, "steps"):
            if ref in seen:
                continue
            if ref in self.all_ids:
                where = self.located.location(self.all_ids[ref])
                self.add(path, f"{prefix}steps.{ref} refers to a step that has not run yet "
                               f"(step '{ref}' at {where} runs later)")
            else:
                hint = did_you_mean(ref, seen)
                self.add(path, f"{prefix}steps.{ref}: no earlier step has id '{ref}'" + (f".{hint}" if hint else ""))
        for ref, fields in step_field_reads(tree):
            problem = check_read(ref, self.result_shape(ref), fields) if ref in seen else None
            if problem:
                self.add(path, prefix + problem)

    def _env_reads(self, tree: Any, path: DataPath, prefix: str) -> None:
        safe = guarded(tree) | self.env_guards
        for ref in templating.attribute_refs(tree, "env"):
            if ref not in self.env_names:
                self.add(path, f"{prefix}env.{ref} is not declared: add '{ref}' to the pipeline's `env:` list")
            elif ref not in safe and ref not in os.environ:
                problem = self.located.problem(path, f"{prefix}env.{ref} is needed but {ref} is not set (and "
                                               f"nothing gives it a default), so every item would fail; set it (export "
                                               f"{ref}=...) or give a default: {{{{ env.{ref} | default('...') }}}}")
                if ref not in self.needs or problem.order < self.needs[ref].order:
                    self.needs[ref] = problem


@lru_cache(maxsize=4096)
def free_names(tree: nodes.Template) -> frozenset[str]:
    """The names a template reads that it does not set, by Jinja's own scoping (its code generator:
    the largest part of checking a template), once per tree. Without Jinja's optimizer, which folds
    constants in place (`x in ['A', 'B']`) in the tree every check shares."""
    names = meta.TrackingCodeGenerator(tree.environment or jinja2.Environment())
    names.optimizer = None
    names.visit(tree)
    return frozenset(names.undeclared_identifiers)


def unknown_callables(tree: nodes.Template, env: jinja2.Environment) -> Iterator[tuple[int, str]]:
    """(template line, message) for each filter or test name the environment does not know."""
    tables: dict[str, Mapping[str, Any]] = {"filter": env.filters, "test": env.tests}
    for node in templating.find_all(tree, (nodes.Filter, nodes.Test)):
        kind = "filter" if isinstance(node, nodes.Filter) else "test"
        if node.name not in tables[kind]:
            yield node.lineno, unknown(kind, node.name, tables[kind])
            continue
        position, named = _NAMED_CALLABLES.get(node.name, (0, "")) if kind == "filter" else (0, "")
        argument = node.args[position] if named and len(node.args) > position else None
        if isinstance(argument, nodes.Const) and isinstance(argument.value, str) and \
                argument.value not in tables[named] and not any(pair.key == "attribute" for pair in node.kwargs):
            yield node.lineno, unknown(named, argument.value, tables[named])


def included_template(env: jinja2.Environment, name: str, ignore_missing: bool) -> nodes.Template | str | None:
    """The template an `include`, `import` or `extends` names, parsed; or what is wrong with it
    (None: missing, as `ignore missing` allows)."""
    try:
        if env.loader is None:
            raise jinja2.TemplateNotFound(name)
        source = env.loader.get_source(env, name)[0]
    except jinja2.TemplateNotFound:
        return None if ignore_missing else "not found in the prompts folder"
    except (OSError, UnicodeDecodeError) as exc:
        return f"unreadable ({type(exc).__name__})"
    try:
        return templating.parse_source(source, False)
    except jinja2.TemplateSyntaxError as exc:
        return f"line {exc.lineno}: {exc.message}"


def result_field_problems(data: dict[str, Any]) -> Iterator[tuple[DataPath, str]]:
    """`summary.rates` and `memo.skip_when` reading `result.X`, and `count_by` and
    `report_columns` naming a field, where X is not one of the pipeline's output fields (unless
    output_base makes them open)."""
    summary, memo, output = data.get("summary") or {}, data.get("memo") or {}, data.get("output")
    if data.get("output_base") is not None or not isinstance(output, dict):
        return
    fields = set(output) | RESULT_EXTRAS
    reads = [(("summary", "rates", name), text) for name, text in (summary.get("rates") or {}).items()]
    for where, expression in reads + ([(("memo", "skip_when"), memo["skip_when"])] if "skip_when" in memo else []):
        tree = templating.parsed(expression)
        for field in templating.attribute_refs(tree, "result") if tree is not None else ():
            if field not in fields:
                yield where, f"result.{field}: " + unknown("output field", field, fields, "output fields")
    count_by = summary.get("count_by")
    if isinstance(count_by, str) and not templating.is_template(count_by) and count_by.split(".")[0] not in fields:
        yield ("summary", "count_by"), unknown("output field", count_by, fields, "output fields")
    for index, column in enumerate(summary.get("report_columns") or []):
        if column.split(".")[0] not in fields:
            yield ("summary", "report_columns", index), unknown("output field", column, fields, "output fields")


def _is_env(node: nodes.Node | None) -> bool:
    return isinstance(node, nodes.Name) and node.name == "env"


def _env_name(node: nodes.Node | None) -> str | None:
    """NAME when the node reads `env.NAME` or `env['NAME']`."""
    root, chain = templating.attribute_chain(node) if node is not None else (None, [])
    return chain[0] if len(chain) == 1 and _is_env(root) else None


def mentioned_in(value: Any) -> set[str]:
    """The env names an `if:` or `enabled:` value reads or tests (its test guards their uses)."""
    tree = templating.parsed(value)
    return set(templating.attribute_refs(tree, "env")) | guarded(tree) if tree is not None else set()


def guarded(tree: nodes.Node) -> set[str]:
    """The names this template reads with a guard (see the module's text)."""
    found: set[str | None] = set()
    for node in templating.find_all(tree, (nodes.Filter, nodes.Test)):
        if node.name in (_DEFAULTS if isinstance(node, nodes.Filter) else _ENV_TESTS):
            found.add(_env_name(node.node))
    for compare in templating.find_all(tree, nodes.Compare):
        if isinstance(compare.expr, nodes.Const) and isinstance(compare.expr.value, str) and \
                any(operand.op in ("in", "notin") and _is_env(operand.expr) for operand in compare.ops):
            found.add(compare.expr.value)
    for call in templating.find_all(tree, nodes.Call):
        if isinstance(call.node, nodes.Getattr) and call.node.attr == "get" and _is_env(call.node.node) \
                and call.args and isinstance(call.args[0], nodes.Const):
            found.add(str(call.args[0].value))
    return {name for name in found if name is not None}
