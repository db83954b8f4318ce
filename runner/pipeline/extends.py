"""`extends:`: a pipeline as a base file plus overrides (a variant; docs/pipeline-language.md
shows one). Every top-level key of the variant but `extends` is laid over the base: mappings
merge key by key, lists and scalars replace, and `steps` (at the top and in a step's `with:`)
are patched by `id` (`after: ID`/`before: ID` place a new step, `remove: true` drops one). An id
the base lacks with no place, an id named twice in one list, and a new param without a
declaration are refused, as the misspellings they almost always are. The base stays inside the
project; a chain of bases is at most MAX_EXTENDS_DEPTH deep and never a cycle. The merged
pipeline keeps each value's file, line and column, so an error points where it was written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.errors import ConfigError, Problem, did_you_mean
from runner.pipeline.files import display, named_file, read_located
from runner.pipeline.params import declared_params, typed_defaults
from runner.pipeline.step_catalog import walk_steps
from runner.yamlpos import Located
from runner.yamlpos import Path as DataPath

PLACING = ("after", "before", "remove")
MAX_EXTENDS_DEPTH = 32       # bases below a variant: real chains are two or three deep


def expand(located: Located, file: Path, project_dir: Path) -> tuple[Located, list[Path]]:
    """`located` (read from `file`) with its params read into two blocks and its `extends:`
    chain merged in (then each param declared by a plain default typed); and the files it came
    from, itself first."""
    expanded, files = _expand(located, file, project_dir, ())
    typed_defaults(expanded)
    return expanded, files


def _expand(located: Located, file: Path, project_dir: Path, chain: tuple[Path, ...]) -> tuple[Located, list[Path]]:
    if not isinstance(located.data, dict):
        raise ConfigError([located.problem((), "a pipeline file must be a mapping (version, name, steps, ...)")])
    problems = declared_params(located)
    data = located.data
    if "extends" not in data:
        problems += _stray_placing(located, data.get("steps"))
        if problems:
            raise ConfigError(problems)
        return located, [file]
    name = data["extends"]
    base_file, reason = named_file(file, name, project_dir) if isinstance(name, str) else \
        (None, "`extends:` names one pipeline file")
    if base_file is None:
        raise ConfigError([*problems, located.problem(("extends",), reason)])
    here = [*chain, file.resolve()]
    if len(here) > MAX_EXTENDS_DEPTH:
        raise ConfigError([*problems, located.problem(("extends",), (
            f"the extends chain is deeper than {MAX_EXTENDS_DEPTH} files (the limit), from {display(here[0])}: "
            "let a variant extend a base nearer the top"))])
    if base_file in here:
        cycle = " -> ".join(display(f) for f in [*here, base_file])
        raise ConfigError([*problems, located.problem(("extends",), f"extends cycle: {cycle}")])
    base, sources = _expand(read_located(base_file), base_file, project_dir, tuple(here))
    merged = _Merge(located, base)
    problems += merged.problems or _stray_placing(merged.out, merged.out.data.get("steps"))
    if problems:
        raise ConfigError(problems)
    return merged.out, [file, *sources]


def _stray_placing(located: Located, steps: Any) -> list[Problem]:
    """`after:`, `before:` and `remove:` outside a variant: they would be ignored."""
    return [located.problem((*path, key), f"`{key}:` places a step of a variant (a file with `extends:`) among its "
                            "base's steps: this step has none to be placed among", key=True)
            for path, step in walk_steps(steps) for key in PLACING if key in step]


Side = tuple[Located, DataPath]       # a value's file and its path there


class _Merge:
    """The variant laid over its base, into a new Located that keeps each value's origin."""

    def __init__(self, variant: Located, base: Located):
        self.variant, self.base = variant, base
        self.out = Located(variant.file, None)
        self.problems: list[Problem] = []
        self.out.data = self.mapping(self.base.data, (self.base, ()), variant.data, (self.variant, ()), (),
                                     drop=("extends",))       # an expanded base has no `extends`
        if "name" not in self.variant.data:
            self.out.data["name"] = Path(self.variant.file).stem
            self._position(("name",), (self.variant, ("extends",)))
        self._check_new_params()

    # -- positions ---------------------------------------------------------------------------
    def _position(self, out: DataPath, side: Side) -> None:
        """The node at `out` was written at `side` (its value; its key too when the side has one)."""
        located, path = side
        self.out.value_pos[out] = located.where(path)
        if path in located.key_pos:
            self.out.key_pos[out] = located.key_pos[path]
        origin = located.file_of(path)
        if origin != self.out.file:
            self.out.origins[out] = origin

    def take(self, value: Any, side: Side, out: DataPath, drop: tuple[str, ...] = ()) -> Any:
        """`value` as written at `side`, with every position below it."""
        self._position(out, side)
        located, path = side
        if isinstance(value, dict):
            return {k: self.take(v, (located, (*path, k)), (*out, k)) for k, v in value.items() if k not in drop}
        if isinstance(value, list):
            return [self.take(v, (located, (*path, i)), (*out, i)) for i, v in enumerate(value)]
        return value

    # -- merging -------------------------------------------------------------------------------
    def merge(self, base: Any, base_side: Side, over: Any, over_side: Side, out: DataPath) -> Any:
        if isinstance(base, dict) and isinstance(over, dict):
            return self.mapping(base, base_side, over, over_side, out)
        if out and out[-1] == "steps" and isinstance(over, list) and isinstance(base, list) \
                and all(isinstance(s, dict) and isinstance(s.get("id"), str) for s in base):
            return self.steps(base, base_side, over, over_side, out)
        return self.take(over, over_side, out)

    def mapping(self, base: dict[str, Any], base_side: Side, over: dict[str, Any], over_side: Side,
                out: DataPath, drop: tuple[str, ...] = ()) -> dict[str, Any]:
        self._position(out, over_side)
        merged: dict[str, Any] = {}
        for key, value in base.items():
            child = (*out, key)
            if key in over:
                merged[key] = self.merge(value, _down(base_side, key), over[key], _down(over_side, key), child)
            else:
                merged[key] = self.take(value, _down(base_side, key), child)
        for key, value in over.items():
            if key not in base and key not in drop:
                merged[key] = self.take(value, _down(over_side, key), (*out, key))
        return merged

    def steps(self, base: list[Any], base_side: Side, over: list[Any], over_side: Side,
              out: DataPath) -> list[Any]:
        """The base's steps patched by the variant's entries (by id), new ones placed, some removed."""
        order: list[tuple[str, int | None, int | None]] = [(s["id"], i, None) for i, s in enumerate(base)]
        variant, path = over_side
        named: dict[str, DataPath] = {}         # each id's entry in this list
        for j, entry in enumerate(over):
            where = (*path, j)
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
                self.problems.append(variant.problem(where, "a step of a variant needs an `id` (the base step "
                                                            "it changes, or a new one with after: or before:)"))
                continue
            ids = [step_id for step_id, _, _ in order]
            step_id = entry["id"]
            if step_id in named:
                self.problems.append(variant.problem((*where, "id"), (
                    f"step '{step_id}' is changed a second time (first at {variant.location(named[step_id])}): "
                    "give all of its changes in one entry, or fix the id")))
                continue
            named[step_id] = (*where, "id")
            if entry.get("remove") is True:
                if step_id in ids:
                    del order[ids.index(step_id)]
                else:
                    self._unknown(where, step_id, ids, "cannot be removed")
                continue
            place = [key for key in ("after", "before") if key in entry]
            if len(place) > 1:
                self.problems.append(variant.problem((*where, "before"), "give one of `after:` and `before:`"))
                continue
            if step_id in ids:
                index = ids.index(step_id)
                found = (step_id, order.pop(index)[1], j)
            elif not place:
                self._unknown(where, step_id, ids, "is new: say where it goes with `after: ID` or `before: ID`")
                continue
            else:
                found = (step_id, None, j)
            if place:
                anchor = entry[place[0]]
                others = [step_id for step_id, _, _ in order]
                if anchor not in others:
                    hint = did_you_mean(str(anchor), others)
                    tail = f".{hint}" if hint else f" (steps: {', '.join(others)})"
                    self.problems.append(variant.problem((*where, place[0]),
                                                         f"no step '{anchor}' to place '{step_id}' {place[0]}{tail}"))
                    continue
                index = others.index(anchor) + (place[0] == "after")
            order.insert(index, found)
        merged: list[Any] = []
        for position, (_, from_base, from_variant) in enumerate(order):
            at = (*out, position)
            if from_base is not None and from_variant is None:
                merged.append(self.take(base[from_base], _down(base_side, from_base), at))
            elif from_variant is not None and from_base is None:
                merged.append(self.take(over[from_variant], _down(over_side, from_variant), at, drop=PLACING))
            elif from_base is not None and from_variant is not None:
                merged.append(self.mapping(base[from_base], _down(base_side, from_base), over[from_variant],
                                           _down(over_side, from_variant), at, drop=PLACING))
        return merged

    def _unknown(self, where: DataPath, step_id: str, ids: list[str], what: str) -> None:
        hint = did_you_mean(step_id, ids)
        known = f".{hint}" if hint else f" (its steps: {', '.join(ids)})"
        self.problems.append(self.variant.problem((*where, "id"), f"the base has no step '{step_id}'{known}; "
                                                                   f"'{step_id}' {what}"))

    def _check_new_params(self) -> None:
        """A plain value under a param name the base does not have is a misspelling."""
        base_params, declared, params = (part if isinstance(part, dict) else {} for part in (
            self.base.data.get("params"), self.variant.data.get("params_schema"), self.variant.data.get("params")))
        for name in params:         # params that are not a mapping: the schema check says so
            if not isinstance(name, str) or name in base_params or name in declared:
                continue
            hint = did_you_mean(name, base_params)
            tail = f".{hint}" if hint else f" (its params: {', '.join(base_params) or 'none'})"
            self.problems.append(self.variant.problem(("params", name), f"the base has no param '{name}'{tail}; a "
                                                      "new param needs a declaration: {default: ..., type: ...}",
                                                      key=True))


def _down(side: Side, key: str | int) -> Side:
    return side[0], (*side[1], key)

