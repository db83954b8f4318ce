"""The check of every template and bare expression of a pipeline, in the scope where it sits.

For each: its syntax, the names it reads (with a did-you-mean, `result.X` suggested where a
rate or rule reads a bare output field), `steps.X` reads against earlier steps and their
result shapes, params and declared env names, unknown filters and tests, the templates it
includes, what its comparisons can hold (runner/checks/semantics.py), and the environment
variables it needs that are not set (runner/checks/env_needs.py, one message per name)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import jinja2

import runner.templating.sandbox as templating
from runner.checks.env_needs import need_message, needed
from runner.checks.result_shapes import check_read, step_field_reads
from runner.checks.semantics import comparison_problems
from runner.checks.static_values import Resolver
from runner.checks.templates import referenced_templates, unknown_callables
from runner.errors import Problem, did_you_mean, unknown
from runner.yamlpos import Located
from runner.yamlpos import Path as DataPath

CONDITION_KEYS = {"if", "when", "until"}


class ExpressionChecks:
    def __init__(self, located: Located, prompt_env: jinja2.Environment, params: dict[str, Any],
                 env_names: set[str], all_ids: dict[str, DataPath], result_shape: Callable[[str], dict[str, Any]],
                 output_fields: set[str]):
        self.located = located
        self.prompt_env = prompt_env
        self.params = params
        self.env_names = env_names
        self.all_ids = all_ids
        self.result_shape = result_shape
        self.output_fields = output_fields
        self.resolver = Resolver(params, result_shape, located.data.get("output") or {}, all_ids)
        self.problems: list[Problem] = []
        self.env_guards: set[str] = set()       # env names the enclosing step's `if` or model's `enabled` tests
        self._needs: dict[str, Problem] = {}      # env name -> the first place that needs it

    def add(self, path: DataPath, message: str) -> None:
        self.problems.append(self.located.problem(path, message))

    def needs(self) -> list[Problem]:
        """One problem per unset variable a template needs, at its first place."""
        return list(self._needs.values())

    def strings(self, value: Any, path: DataPath, names: set[str], seen: set[str], bare: bool = False) -> None:
        """Every template in a YAML value (and the value itself as a bare expression when `bare`)."""
        if isinstance(value, dict):
            for key, child in value.items():
                self.strings(child, (*path, key), names, seen, bare=key in CONDITION_KEYS)
            return
        if isinstance(value, list):
            for index, child in enumerate(value):
                self.strings(child, (*path, index), names, seen)
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
        self.tree(tree, path, names, seen, "")

    def tree(self, tree: Any, path: DataPath, names: set[str], seen: set[str], prefix: str,
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
                self.tree(named.tree, path, names if named.shares_context else set(), seen, where,
                          (*chain, named.name))
        known_globals = set(self.prompt_env.globals)
        try:
            free = templating.free_names(tree)
        except jinja2.TemplateSyntaxError as exc:     # Jinja's own compile-time checks
            if not unknowns:
                self.add(path, f"{prefix}template error: {exc.message}")
            free = set()
        for name in sorted(free - names - known_globals):
            self.add(path, prefix + self._undefined(name, names))
        if "steps" in names:
            self._step_reads(tree, path, seen, prefix)
        if "params" in names:
            for ref, _ in templating.attribute_refs(tree, "params"):
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

    def _env_reads(self, tree: Any, path: DataPath, prefix: str) -> None:
        for ref, _ in templating.attribute_refs(tree, "env"):
            if ref not in self.env_names:
                self.add(path, f"{prefix}env.{ref} is not declared: add '{ref}' to the pipeline's `env:` list")
        for name in needed(tree, self.env_guards):
            if name in self.env_names and name not in os.environ:
                problem = self.located.problem(path, prefix + need_message(name))
                if name not in self._needs or problem.order < self._needs[name].order:
                    self._needs[name] = problem
