"""YAML -> plain data plus the line and column of every node.

Safe-load semantics only (the node tree goes through PyYAML's SafeConstructor);
duplicate keys are errors rather than silently last-wins."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import yaml

from runner.errors import ConfigError, Problem
from runner.fileio import MAX_DEPTH, TOO_MANY_DIGITS

Path = tuple[str | int, ...]


@dataclass
class Located:
    """Loaded data and where each path came from (1-based line, column); a path another file than
    `file` wrote (a base it `extends:`, a probe file) has that file's name in `origins`."""

    file: str
    data: Any
    value_pos: dict[Path, tuple[int, int]] = field(default_factory=dict)
    key_pos: dict[Path, tuple[int, int]] = field(default_factory=dict)
    overridden: dict[Path, str] = field(default_factory=dict)   # path -> the --set that wrote it
    origins: dict[Path, str] = field(default_factory=dict)      # path -> the file that wrote it, when not `file`

    def _found(self, path: Path, key: bool) -> tuple[Path, tuple[int, int]]:
        """The closest path with a known position at or above `path` (walking up), and that position."""
        table = self.key_pos if key else self.value_pos
        probe = tuple(path)
        while probe:
            if probe in table:
                return probe, table[probe]
            if not key and probe in self.key_pos:
                return probe, self.key_pos[probe]
            probe = probe[:-1]
        return (), self.value_pos.get((), (1, 1))

    def where(self, path: Path, *, key: bool = False) -> tuple[int, int]:
        """The closest known position for `path` (walks up to a parent)."""
        return self._found(path, key)[1]

    def location(self, path: Path, *, key: bool = False) -> str:
        """`file:line:col`, or the `--set` that wrote this path."""
        for depth in range(len(path), 0, -1):
            if tuple(path[:depth]) in self.overridden:
                written = self.overridden[tuple(path[:depth])]
                return written if written.startswith("--") else f"--set {written}"
        probe, (line, col) = self._found(path, key)
        return f"{self.origins.get(probe, self.file)}:{line}:{col}"

    def file_of(self, path: Path) -> str:
        """The file that wrote the value at `path` (or the closest parent with a position)."""
        return self.origins.get(self._found(path, False)[0], self.file)

    def describe(self, path: Path) -> str:
        """`file:line:col: json.path`."""
        return f"{self.location(path)}: {json_path(path)}"

    def problem(self, path: Path, message: str, *, key: bool = False) -> Problem:
        where = self.location(path, key=key)
        order = self.where(path, key=key) if not where.startswith("--set") else (10**9, 0)
        return Problem(where, json_path(path), message, order)


def move_positions(located: Located, source: Path, target: Path, copy: bool = False) -> None:
    """Give every position at or below `source` to the same place below `target` (a moved value
    points at where it was written; `copy` keeps them at `source` too); the key at `source` moves
    only to a key of the same name."""
    size = len(source)
    same_key = bool(source) and bool(target) and source[-1] == target[-1]
    tables: list[dict[Path, Any]] = [located.value_pos, located.key_pos, located.origins]
    for table in tables:
        keep_key = table is located.key_pos and not same_key
        moved = {path: where for path, where in table.items()
                 if path[:size] == source and not (keep_key and path == source)}
        for path, where in moved.items():
            if not copy:
                del table[path]
            table[(*target, *path[size:])] = where


def json_path(path: Path) -> str:
    """('steps', 2, 'with') -> 'steps[2].with'."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


# libyaml composes (with the same marks) several times faster than PyYAML; a document it refuses is
# parsed again by PyYAML, whose messages say more. Its composer recurses in C without a bound, so a
# document that could nest deeper than C_NESTING_BOUND (each level needs one of NESTING_CHARS) has
# its depth read first from libyaml's events, made without recursion.
C_COMPOSER = getattr(yaml, "CSafeLoader", None)
C_NESTING_BOUND = 5_000
NESTING_CHARS = "[{-?:\n"


def compose(text: str) -> yaml.Node | None:
    """The node tree of one YAML document (None: an empty one), by libyaml where it is
    installed, else (and for the wording of a document libyaml refuses) by PyYAML. One nested
    past the recursion limit is a RecursionError first (libyaml's events, never recursing)."""
    if C_COMPOSER is None:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    try:
        if sum(text.count(c) for c in NESTING_CHARS) >= C_NESTING_BOUND:
            _within_recursion_limit(text, C_COMPOSER)
        return yaml.compose(text, Loader=C_COMPOSER)
    # PyYAML's own parser words the error (the messages users know), and a lone surrogate (a
    # command-line argument's bytes that are not UTF-8), which libyaml cannot encode, too
    except (yaml.YAMLError, UnicodeEncodeError):
        return yaml.compose(text, Loader=yaml.SafeLoader)


def _within_recursion_limit(text: str, loader: type[yaml.CSafeLoader]) -> None:
    bound, depth = sys.getrecursionlimit(), 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > bound:
                raise RecursionError(f"YAML nested deeper than {bound} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


# Aliases may repeat a node; beyond this many extra nodes a document is refused (a
# "billion laughs" file of a few hundred bytes would otherwise expand to gigabytes).
MAX_ALIAS_EXPANSION = 100_000


class Constructor(yaml.SafeLoader):
    """PyYAML's safe constructor, an integer past Python's digit limit for reading one (4,300
    by default, against quadratic parsing) a located error rather than a ValueError."""

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        try:
            return super().construct_yaml_int(node)
        except ValueError:
            raise yaml.constructor.ConstructorError(
                None, None, f"{TOO_MANY_DIGITS} (quote it to keep it as text)", node.start_mark) from None


Constructor.add_constructor("tag:yaml.org,2002:int", Constructor.construct_yaml_int)


def load_value(text: str) -> Any:
    """One YAML document as plain data (a YAML input, a `--set` or `--record` value); yaml.YAMLError
    for aliases expanding past MAX_ALIAS_EXPANSION, nesting past MAX_DEPTH (JSON's bound) or a
    key given twice in one mapping."""
    too_deep = f"nested too deeply (more than {MAX_DEPTH} levels)"
    try:
        node = compose(text)
    except RecursionError:
        raise yaml.YAMLError(too_deep) from None
    if node is None:
        return None
    refused = alias_problem(node)
    if refused:
        raise yaml.constructor.ConstructorError(None, None, refused[1], refused[0].start_mark)
    shape = _shape_problem(node, MAX_DEPTH, too_deep)
    if shape:
        error = KeyTwice if shape[2] else yaml.constructor.ConstructorError
        raise error(None, None, shape[1], shape[0].start_mark)
    return Constructor("").construct_document(node)


class KeyTwice(yaml.constructor.ConstructorError):
    """A mapping that gives a key twice: data that reads, but not as one value."""


def _shape_problem(root: yaml.Node, limit: int, too_deep: str) -> tuple[yaml.Node, str, bool] | None:
    """In one walk (not recursed), in file order: the first collection past `limit` levels (as
    fileio.too_deep counts), with `too_deep`, or the first mapping that gives a key twice (True:
    PyYAML keeps the last silently; the pipeline loader and the JSON inputs refuse it)."""
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return node, too_deep, False
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value != "<<":
                    if key.value in seen:
                        return key, (f"the key '{key.value[:40]}' is given twice in one mapping (only one value "
                                     "would be read)"), True
                    seen.add(key.value)
        inner = [(child, depth + 1) for child in _children(node) if not isinstance(child, yaml.ScalarNode)]
        stack.extend(reversed(inner))          # so that the first in the file is popped first
    return None


def load_located(text: str, file: str) -> Located:
    """Parse YAML text, keeping positions; raise ConfigError on syntax or duplicate keys."""
    located = Located(file, None)
    problems: list[Problem] = []
    try:
        root = compose(text)
        if root is None:
            return located
        refused = alias_problem(root)
        if refused:
            line, col = _mark(refused[0])
            raise ConfigError([Problem(f"{file}:{line}:{col}", "", refused[1])])
        located.data = _build(root, (), located, problems, Constructor(""))
    except yaml.YAMLError as exc:
        line, col, reason = where_and_why(exc, text)
        syntax = isinstance(exc, yaml.MarkedYAMLError) and not isinstance(exc, yaml.constructor.ConstructorError)
        kind = "YAML syntax error" if syntax else "YAML error"
        raise ConfigError([Problem(f"{file}:{line}:{col}", "", f"{kind}: {reason}")]) from None
    except RecursionError:
        raise ConfigError([Problem(f"{file}:1:1", "", "YAML nested too deeply to load")]) from None
    if problems:
        raise ConfigError(problems)
    return located


def where_and_why(exc: yaml.YAMLError, text: str) -> tuple[int, int, str]:
    """The 1-based line and column a YAML error is at, and what it says there: a marked
    error's problem and context, or the character the reader refused (found by its offset)."""
    if isinstance(exc, yaml.reader.ReaderError):
        before = text[:exc.position]
        return (before.count("\n") + 1, exc.position - before.rfind("\n"), f"character #x{exc.character:04x} is "
                "not allowed in YAML: remove it, or write it as an escape in a double-quoted string")
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        reason = f"{exc.problem} ({exc.context})" if exc.problem and exc.context else exc.problem or str(exc)
        return (mark.line + 1, mark.column + 1, reason) if mark else (1, 1, reason)
    return 1, 1, str(exc)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def alias_problem(root: yaml.Node) -> tuple[yaml.Node, str] | None:
    """Why a composed document cannot be expanded (an alias to itself, or aliases expanding past
    MAX_ALIAS_EXPANSION nodes), with the anchored node to blame; one pass, nothing expanded."""
    sizes: dict[int, int] = {}
    uses: dict[int, int] = {}
    nodes: dict[int, yaml.Node] = {}
    open_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            open_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            continue
        if key in sizes:
            continue
        nodes[key] = node
        open_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            uses[id(child)] = uses.get(id(child), 0) + 1
            if id(child) in open_path:
                return child, "an alias refers to a node that contains it (a recursive structure)"
            stack.append((child, False))
    extra = sizes[id(root)] - len(nodes)
    if extra <= MAX_ALIAS_EXPANSION:
        return None
    worst = max((k for k, n in uses.items() if n > 1), key=lambda k: sizes[k] * uses[k])
    return nodes[worst], (f"aliases expand this document to {sizes[id(root)]:,} nodes ({len(nodes):,} written, "
                          f"at most {MAX_ALIAS_EXPANSION:,} repeats allowed): refused; the anchor defined here "
                          f"is used {uses[worst]} times")


def _build(node: yaml.Node, path: Path, located: Located, problems: list[Problem],
           constructor: Constructor) -> Any:
    located.value_pos.setdefault(path, _mark(node))
    if isinstance(node, yaml.MappingNode):
        constructor.flatten_mapping(node)
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = constructor.construct_object(key_node, deep=True)
            line, col = _mark(key_node)
            if not isinstance(key, (str, int, float, bool)):
                why = (f"the key {key_node.value} is a date or time in YAML, not text: quote it"
                       if hasattr(key, "isoformat") else "mapping keys must be text or numbers")
                problems.append(Problem(f"{located.file}:{line}:{col}", json_path(path), why, (line, col)))
                continue
            key = str(key)
            child = (*path, key)
            if key in out:
                first = located.key_pos.get(child, (0, 0))
                problems.append(Problem(f"{located.file}:{line}:{col}", json_path(child),
                                        f"duplicate key '{key}' (first defined at line {first[0]})", (line, col)))
                continue
            located.key_pos[child] = line, col
            out[key] = _build(value_node, child, located, problems, constructor)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, (*path, i), located, problems, constructor) for i, item in enumerate(node.value)]
    return constructor.construct_object(node, deep=True)
