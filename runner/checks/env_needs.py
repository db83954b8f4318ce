"""Environment variables a pipeline needs and this environment does not set.

A template that reads `env.NAME` needs NAME unless the read is guarded: a `default(...)`
on it, an `is defined` / `is undefined` / `is none` test of it, `'NAME' in env` or
`env.get('NAME')` anywhere in the same template, an `if:` of the step that mentions it, or
an `enabled:` of the model that mentions it (a model disabled when NAME is absent does not
need it). A model that is `enabled: false` needs nothing. `runner validate` runs in CI with
no variables set, so only an unguarded read is a need: it would fail every item."""

from __future__ import annotations

from typing import Any

import jinja2
from jinja2 import nodes

import runner.templating.sandbox as templating

_TESTS = {"defined", "undefined", "none"}
_DEFAULTS = {"default", "d"}


def _is_env(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Name) and node.name == "env"


def _env_name(node: nodes.Node | None) -> str | None:
    """NAME when the node reads `env.NAME` or `env['NAME']`."""
    if isinstance(node, nodes.Getattr) and _is_env(node.node):
        return node.attr
    if isinstance(node, nodes.Getitem) and _is_env(node.node) \
            and isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
        return node.arg.value
    return None


def mentioned_in(value: Any) -> set[str]:
    """The env names an `if:` or `enabled:` value reads or tests (its test guards their uses)."""
    if not isinstance(value, str):
        return set()
    try:
        tree = templating.parse_source(value, not templating.is_template(value))
    except jinja2.TemplateSyntaxError:
        return set()
    return set(templating.attribute_refs(tree, "env")) | guarded(tree)


def guarded(tree: nodes.Node) -> set[str]:
    """The names this template reads with a guard (see the module's text)."""
    found: set[str | None] = set()
    for node in templating.find_all(tree, (nodes.Filter, nodes.Test)):
        if node.name in (_DEFAULTS if isinstance(node, nodes.Filter) else _TESTS):
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


def need_message(name: str) -> str:
    return (f"env.{name} is needed but {name} is not set (and nothing gives it a default), so every item would "
            f"fail; set it (export {name}=...) or give a default: {{{{ env.{name} | default('...') }}}}")
