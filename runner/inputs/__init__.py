"""Input adapters: turn --input (or --record) into items."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from runner.errors import InputError
from runner.registry import Registry
from runner.yamlpos import KeyTwice, load_value

if TYPE_CHECKING:
    from runner.text.perturb import Rewrite

# An adapter may return its records lazily (a generator): inputs of any size are then read
# as the run takes them. Whatever makes the whole input unusable is raised before the first.
Adapter = Callable[[Path, dict[str, Any]], Iterable["Record"]]


@dataclass
class Record:
    """One record an adapter read, or the reason it could not be read."""

    value: Any
    error: str | None = None
    line: int | None = None       # where the record starts in its file, where the adapter says


@dataclass
class Item:
    """One unit of work: 1-based `index` in input order."""

    index: int
    value: Any
    parent: Any = None
    error: str | None = None
    exploded_from: str | None = None     # the parent's field this item is one element of, left out of its key
    rewrites: tuple[Rewrite, ...] = ()     # a probe copy's perturbations of step results (runner probe)

    @property
    def key(self) -> str:
        """A hash of what the item reads (its record, its parent's, a probe copy's perturbations):
        the same in every run of the same input at any position (reviews follow it). An exploded
        item's key leaves out the list it is one element of (`exploded_from`): changing one slide
        of a deck keeps the other slides' keys, unless the pipeline reads the deck's slides."""
        parent = self.parent
        if self.exploded_from is not None and isinstance(parent, dict):
            parent = {name: value for name, value in parent.items() if name != self.exploded_from}
        read = [self.value, parent, *([[r.seed for r in self.rewrites]] if self.rewrites else [])]
        text = json.dumps(read, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class ItemStream:
    """Items as a re-iterable stream: each pass reads the input again, one item at a time, so a
    run of any size never holds its items (`len` is one counting pass, done once)."""

    def __init__(self, open_items: Callable[[], Iterable[Item]], count: Callable[[], int] | None = None):
        self._open = open_items
        self._count: int | None = None
        self._counter = count         # a cheaper count than a pass over the items, where there is one

    def __iter__(self) -> Iterator[Item]:
        return iter(self._open())

    def __len__(self) -> int:
        if self._count is None:
            self._count = self._counter() if self._counter is not None else sum(1 for _ in self)
        return self._count

    @classmethod
    def of(cls, items: list[Item]) -> ItemStream:
        return cls(lambda: items, lambda: len(items))


# Every module of runner/inputs is imported on the first lookup and registers its adapters;
# installed packages add theirs through the entry point group `runner.inputs` (name -> adapter).
ADAPTERS: Registry[Adapter] = Registry("input adapter", "runner.inputs", "runner.inputs")
adapter = ADAPTERS.register

# How many records an adapter would yield, found without building them, where an adapter
# knows a cheaper way than reading every record (a run counts its input before it starts).
Counter = Callable[[Path, dict[str, Any]], int]
COUNTERS: dict[str, Counter] = {}


def counts(name: str) -> Callable[[Counter], Counter]:
    """Decorator: the record counter of adapter `name` (it must count exactly what the adapter yields)."""
    def add(counter: Counter) -> Counter:
        COUNTERS[name] = counter
        return counter
    return add


# The JSON Schema of an adapter's options (`input.with`), where it takes any: `runner validate`
# checks the pipeline's options against it.
OPTION_SCHEMAS: dict[str, dict[str, Any]] = {}


def takes(name: str, schema: dict[str, Any]) -> None:
    """Adapter `name` takes the options `schema` describes."""
    OPTION_SCHEMAS[name] = schema


def options_schema(name: str) -> dict[str, Any] | None:
    ADAPTERS.get(name)          # the adapter's module declares its options
    return OPTION_SCHEMAS.get(name)


def record_counter(name: str) -> Counter | None:
    ADAPTERS.get(name)          # the adapter's module registers its counter
    return COUNTERS.get(name)


def iter_records(name: str, path: Path, options: dict[str, Any], shown_as: str | None = None) -> Iterable[Record]:
    """The records of `path`, read as they are taken where the adapter can (JSONL, JSON lines,
    markdown citations); an unusable input raises here, before the first record. `shown_as`:
    what its messages call the file when it is a copy of the input the user gave (standard
    input, an upload), so that a row's error reads as it does when `runner run` reads the file."""
    read = ADAPTERS.get(name)
    shown = shown_as or str(path)
    if not path.is_file():
        raise InputError(f"{shown}: input file not found (or not a regular file)")
    try:
        records = read(path, options)
    except RecursionError:
        raise InputError(f"{shown}: nested too deeply to read") from None
    except InputError as exc:
        if shown_as is None:
            raise
        raise InputError(str(exc).replace(str(path), shown_as)) from None
    if shown_as is None:
        return records
    if isinstance(records, list):
        return [_shown(record, path, shown_as) for record in records]
    return (_shown(record, path, shown_as) for record in records)


def _shown(record: Record, path: Path, shown_as: str) -> Record:
    return replace(record, error=record.error.replace(str(path), shown_as)) if record.error else record


def iter_items(records: Iterable[Record], explode: str | None, list_in_key: bool = False) -> Iterator[Item]:
    """Number records (exploding a list field into one item per element), one at a time; an
    exploded item's key leaves out its list unless `list_in_key` (the pipeline reads the list)."""
    numbers = itertools.count(1)
    for number, record in enumerate(records, start=1):
        value = record.value
        children = value.get(explode) if explode and isinstance(value, dict) else None
        if record.error or not explode:
            yield Item(next(numbers), value, error=record.error)
        elif not isinstance(children, list):
            yield Item(next(numbers), value, error=f"record {number}: field '{explode}' is missing or not a list")
        else:
            apart = None if list_in_key else explode
            yield from (Item(next(numbers), child, parent=value, exploded_from=apart) for child in children)


def namespace_scope(value: Any, names: Iterable[str]) -> dict[str, Any]:
    """The names an item's templates read when its input says `namespaces:` (e.g. [item, sample],
    the OpenAI Evals row `{"item": {...}, "sample": {...}}`): each the record's field of that name,
    a mapping, or an empty mapping when the record has none. InputError says what is wrong."""
    names = list(names)
    if not isinstance(value, dict):
        raise InputError(f"the record is a {type(value).__name__}, not a mapping of {', '.join(names)} "
                         f"(input.namespaces)")
    scope: dict[str, Any] = {}
    for name in names:
        field = value.get(name)
        if field is not None and not isinstance(field, dict):
            raise InputError(f"the record's '{name}' is a {type(field).__name__}, not a mapping (input.namespaces)")
        scope[name] = field if field is not None else {}
    return scope


def record_from_pairs(pairs: list[str], cell: Callable[[str, str], Any] | None = None) -> dict[str, Any]:
    """`--record KEY=VALUE ...` -> one item: each value as `cell` reads it (a CSV pipeline's: as
    a cell of its column, text unless `types` says otherwise, so the item is the one its row
    makes), else parsed as YAML."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise InputError(f"--record {pair}: expected KEY=VALUE")
        try:
            out[key] = cell(key, raw) if cell is not None else _scalar(raw)
        except ValueError as exc:
            raise InputError(f"--record {pair}: {exc}") from None
        except yaml.YAMLError as exc:
            raise InputError(f"--record {key}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    return out


def _scalar(raw: str) -> Any:
    """YAML for numbers, booleans, lists and mappings in brackets; text stays text
    (so `claim=The sky: blue` is a sentence, not a mapping)."""
    if not raw.strip():
        return ""
    try:
        value = load_value(raw)
    except KeyTwice:
        raise                   # a mapping meant as one, with a key twice: said, never kept as text
    except yaml.YAMLError:
        return raw
    if isinstance(value, (dict, list)) and not raw.lstrip().startswith(("[", "{")):
        return raw
    if not isinstance(value, (str, int, float, bool, dict, list)) and value is not None:
        return raw   # dates and the like stay as typed
    return value
