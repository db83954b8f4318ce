"""One small registry for every kind of named plug-in (step types, input adapters,
search providers): entries register themselves by name with a decorator, and the
built-ins are the modules of one package. A lookup imports the module named like the entry
first, and every module of the package when that does not find it (or to list them all). A
new built-in is a new module in that package; nothing else names it."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from runner.errors import RunnerError, unknown

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str, builtins: str):
        self.kind = kind                  # "step type", in messages
        self.builtins = builtins          # the package whose modules register the built-ins
        self._entries: dict[str, T] = {}
        self._loaded = False

    def add(self, name: str, entry: T) -> T:
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
        if name not in self._entries:
            self._load_named(name)
        if name not in self._entries:
            self._load()
        try:
            return self._entries[name]
        except KeyError:
            raise RunnerError(unknown(self.kind, name, self._entries)) from None

    __getitem__ = get

    def names(self) -> list[str]:
        self._load()
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

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

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        package = importlib.import_module(self.builtins)
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{self.builtins}.{module.name}")
