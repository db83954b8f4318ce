"""Environment variables a pipeline needs and this environment does not set.

A template that reads `env.NAME` needs NAME unless the read is guarded: a `default(...)`
on it, an `is defined` / `is undefined` / `is none` test of it, `'NAME' in env` or
`env.get('NAME')` anywhere in the same template, an `if:` of the step that mentions it, or
an `enabled:` of the model that mentions it (a model disabled when NAME is absent does not
need it). A model that is `enabled: false` needs nothing. `runner validate` runs in CI with
no variables set, so only an unguarded read is a need: it would fail every item."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jinja2
from jinja2 import nodes

import runner.templating.sandbox as templating

_TESTS = {"defined", "undefined", "none"}
_DEFAULTS = {"default", "d"}


def _env_name(node: nodes.Node) -> str | None:
    """NAME when the node reads `env.NAME` or `env['NAME']`."""
    if isinstance(node, nodes.Getattr) and isinstance(node.node, nodes.Name) and node.node.name == "env":
        return node.attr
    if isinstance(node, nodes.Getitem) and isinstance(node.node, nodes.Name) and node.node.name == "env" \
            and isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
        return node.arg.value
    return None


def mentioned_in(value: Any) -> set[str]:
    """The env names an `if:` or `enabled:` value reads (its test guards their uses)."""
    if not isinstance(value, str):
        return set()
    try:
        return mentioned(templating.parse_source(value, not templating.is_template(value)))
    except jinja2.TemplateSyntaxError:
        return set()


def mentioned(tree: nodes.Node) -> set[str]:
    """Every NAME the template reads as env.NAME (what an `if:` or `enabled:` tests)."""
    return {name for name, _ in templating.attribute_refs(tree, "env")} | guarded(tree)


def guarded(tree: nodes.Node) -> set[str]:
    """The names this template reads with a guard (see the module's text)."""
    found: set[str] = set()
    for node in templating.find_all(tree, nodes.Filter):
        name = _env_name(node.node) if node.node is not None else None
        if name and node.name in _DEFAULTS:
            found.add(name)
    for test in templating.find_all(tree, nodes.Test):
        name = _env_name(test.node)
        if name and test.name in _TESTS:
            found.add(name)
    for compare in templating.find_all(tree, nodes.Compare):
        for operand in compare.ops:
            if operand.op in ("in", "notin") and isinstance(operand.expr, nodes.Name) and operand.expr.name == "env" \
                    and isinstance(compare.expr, nodes.Const) and isinstance(compare.expr.value, str):
                found.add(compare.expr.value)
    for call in templating.find_all(tree, nodes.Call):
        if isinstance(call.node, nodes.Getattr) and call.node.attr == "get" and call.args \
                and isinstance(call.node.node, nodes.Name) and call.node.node.name == "env" \
                and isinstance(call.args[0], nodes.Const):
            found.add(str(call.args[0].value))
    return found


def needed(tree: nodes.Node, context_guards: set[str]) -> Iterator[str]:
    """The names the template reads with no guard in it nor around it."""
    safe = guarded(tree) | context_guards
    yield from (name for name, _ in templating.attribute_refs(tree, "env") if name not in safe)


def need_message(name: str) -> str:
    return (f"env.{name} is needed but {name} is not set (and nothing gives it a default), so every item would "
            f"fail; set it (export {name}=...) or give a default: {{{{ env.{name} | default('...') }}}}")
