"""One small registry for every kind of named plug-in (step types, input adapters,
search providers): entries register themselves by name with a decorator, and the
built-ins are the modules of one package. A lookup imports the module named like the entry
first, and every module of the package when that does not find it (or to list them all). A
new built-in is a new module in that package; nothing else names it.

Installed packages add entries through entry points (`entry_group`, e.g. `runner.steps`), read
only when a name is not a built-in's or all are listed; a name is taken once, so a plugin never
replaces a built-in."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from runner.errors import RunnerError, unknown

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str, builtins: str, entry_group: str | None = None):
        self.kind = kind                  # "step type", in messages
        self.builtins = builtins          # the package whose modules register the built-ins
        self.entry_group = entry_group    # the entry point group of installed plugins
        self._entries: dict[str, T] = {}
        self._loaded = False              # every built-in module imported
        self._installed_loaded = False    # every installed plugin's entry point read

    def add(self, name: str, entry: T) -> T:
        """Register `entry` as `name`; a name is taken once (a plugin never replaces a built-in)."""
        if self._entries.get(name, entry) is not entry:
            raise RunnerError(f"{self.kind} '{name}' is registered twice ({_origin(self._entries[name])} and "
                              f"{_origin(entry)})")
        self._entries[name] = entry
        return entry

    def remove(self, name: str) -> None:
        """Forget an entry added in this process (a plug-in a test registered), if there."""
        self._entries.pop(name, None)

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: `@REGISTRY.register("name")`."""
        return lambda entry: self.add(name, entry)

    def get(self, name: str) -> T:
        """The entry, or a RunnerError naming the nearest known name."""
        if not self._find(name):
            raise RunnerError(unknown(self.kind, name, self.names()))
        return self._entries[name]

    def names(self) -> list[str]:
        self.load_builtins()
        self._load_installed()
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._find(name)

    def _find(self, name: str) -> bool:
        """Whether `name` is registered, reading no more than it takes: the built-in module of that
        name, then every built-in, then the installed plugins."""
        if name not in self._entries:
            self._load_named(name)
        if name not in self._entries:
            self.load_builtins()
        if name not in self._entries:
            self._load_installed()
        return name in self._entries

    def _load_named(self, name: str) -> None:
        """Import the built-in module of that name, where there is one: a run imports the
        entries it uses, not all of them (each costs its import and its dataclasses)."""
        if self._loaded or not name.isidentifier():
            return
        module = f"{self.builtins}.{name}"
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise

    def load_builtins(self) -> None:
        """Import every built-in now (before a plugin registers: a plugin then cannot take a
        built-in's name, whose module would otherwise register it later)."""
        if self._loaded:
            return
        self._loaded = True
        package = importlib.import_module(self.builtins)
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{self.builtins}.{module.name}")

    def _load_installed(self) -> None:
        """The entries of installed packages (their entry points), read once."""
        if self._installed_loaded or not self.entry_group:
            return
        self._installed_loaded = True
        for name, entry in entry_point_objects(self.entry_group).items():
            self.add(name, entry)


def _origin(entry: Any) -> str:
    return f"{getattr(entry, '__module__', '?')}.{getattr(entry, '__qualname__', type(entry).__name__)}"


def entry_point_objects(group: str) -> dict[str, Any]:
    """Name -> object of each installed entry point of `group`; one failing to load is a RunnerError naming it."""
    from importlib.metadata import entry_points
    found: dict[str, Any] = {}
    for point in entry_points(group=group):
        try:
            found[point.name] = point.load()
        except Exception as exc:     # any error of the plugin's own code
            raise RunnerError(f"entry point {group} '{point.name}' ({point.value}) failed to load: "
                              f"{type(exc).__name__}: {exc}") from None
    return found
