"""Jinja filters of plugins: a module a pipeline names (`plugins:`) registers its filters
with `@template_filter("name")`; an installed package through the entry point group
`runner.filters` (name -> function). Every environment's filter table looks them up when a
template names a filter that neither Jinja nor runner has, so a pipeline that uses none never
reads the installed packages' entry points. A plugin's filter never takes a built-in's name."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar

import jinja2.filters

from runner.errors import RunnerError

ENTRY_GROUP = "runner.filters"
PLUGIN_FILTERS: dict[str, Callable[..., Any]] = {}
# Names a plugin may not take: Jinja's filters, and runner's (templating adds them as it is
# imported, which the loader and every run do before they import a plugin).
BUILTIN_FILTERS: set[str] = set(jinja2.filters.FILTERS)
F = TypeVar("F", bound=Callable[..., Any])


def template_filter(name: str) -> Callable[[F], F]:
    """Decorator: register a plugin's Jinja filter as `name` (a name is taken once)."""
    def add(function: F) -> F:
        _check_name(name, function)
        PLUGIN_FILTERS[name] = function
        return function
    return add


@cache
def installed_filters() -> dict[str, Callable[..., Any]]:
    """The filters installed packages register, read once per process."""
    from runner.registry import entry_point_objects
    found = entry_point_objects(ENTRY_GROUP)
    for name, function in found.items():
        _check_name(name, function)
    return found


def _check_name(name: str, function: Callable[..., Any]) -> None:
    if name in BUILTIN_FILTERS:
        raise RunnerError(f"a plugin's filter '{name}' has the name of a built-in filter")
    if PLUGIN_FILTERS.get(name, function) is not function:
        raise RunnerError(f"filter '{name}' is registered twice")


class FilterTable(dict[str, Callable[..., Any]]):
    """An environment's filters: Jinja's and runner's, then a plugin's on a name not found."""

    def _plugin(self, name: object) -> Callable[..., Any] | None:
        if not isinstance(name, str):
            return None
        found = PLUGIN_FILTERS.get(name) or installed_filters().get(name)
        if found is not None:
            self[name] = found
        return found

    def __missing__(self, name: str) -> Callable[..., Any]:
        found = self._plugin(name)
        if found is None:
            raise KeyError(name)
        return found

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or self._plugin(name) is not None

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self else default
