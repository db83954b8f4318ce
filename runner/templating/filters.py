"""The filters templates have beyond Jinja's: runner's own (`RUNNER_FILTERS`), and those of
plugins: a module a pipeline names (`plugins:`) registers its filters with
`@template_filter("name")`; an installed package through the entry point group
`runner.filters` (name -> function). Every environment's filter table looks a plugin's up when a
template names a filter that neither Jinja nor runner has, so a pipeline that uses none never
reads the installed packages' entry points. A plugin's filter never takes a built-in's name."""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, TypeVar

import jinja2.filters
from jinja2.exceptions import SecurityError

from runner.errors import RunnerError
from runner.templating.limits import tojson
from runner.text.sentences import split_sentences

_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def normalize(text: object) -> str:
    """Unicode NFKC, casefold, collapse whitespace."""
    return " ".join(unicodedata.normalize("NFKC", str(text)).casefold().split())


def normalize_html(html: object) -> str:
    """Strip comments, collapse whitespace, lowercase (the slide judge's content key)."""
    text = _HTML_COMMENT.sub("", str(html))
    text = re.sub(r">\s+<", "><", text)
    return " ".join(text.split()).lower()


def sha256(text: object) -> str:
    """The hex SHA-256 of the text: a stable content key."""
    return hashlib.sha256(str(text).encode("utf-8")).hexdigest()


# User patterns run on the `regex` engine (re's syntax) with a time bound: a pattern that
# backtracks catastrophically fails its item instead of hanging the run.
REGEX_SECONDS = 1.0


def _user_regex(function: str, pattern: str, text: str, ignorecase: bool) -> Any:
    import regex
    try:
        return getattr(regex, function)(pattern, text, regex.IGNORECASE if ignorecase else 0, timeout=REGEX_SECONDS)
    except TimeoutError:
        raise SecurityError(f"regex {pattern!r} ran over {REGEX_SECONDS:g} s on {len(text):,} characters "
                            "(catastrophic backtracking?)") from None
    except regex.error as exc:
        raise jinja2.TemplateRuntimeError(f"invalid regex {pattern!r}: {exc}") from None


def regex_findall(text: object, pattern: str, ignorecase: bool = False) -> list[Any]:
    """Every match of a pattern (Python's syntax; its groups when it has any), bounded in time."""
    return list(_user_regex("findall", pattern, str(text), ignorecase))


def regex_search(text: object, pattern: str, ignorecase: bool = False) -> Any:
    """The first match: its groups (one group -> that string), or the match text, or None."""
    match = _user_regex("search", pattern, str(text), ignorecase)
    if not match:
        return None
    if match.re.groups == 0:
        return match.group(0)
    return match.group(1) if match.re.groups == 1 else list(match.groups())


def clamp(value: float, low: float = 0.0, high: float = 1.0) -> float:
    """The number kept within [low, high] (default 0 to 1)."""
    return max(low, min(high, float(value)))


def mean(values: Any, attribute: str | None = None, digits: int | None = None) -> float | None:
    """The mean of the numbers in a list (of each row's `attribute`, rows without it left out),
    rounded to `digits` when given; none (null) when there is no number to average. Booleans
    are not numbers here: a mean of flags is a rate, which `summary.rates` gives with its n."""
    rows = values or []
    picked = [row.get(attribute) if isinstance(row, Mapping) else None for row in rows] if attribute else list(rows)
    numbers = [float(v) for v in picked if isinstance(v, (int, float)) and not isinstance(v, bool)
               and math.isfinite(v)]
    if not numbers:
        return None
    average = math.fsum(numbers) / len(numbers)
    return round(average, digits) if digits is not None else average


_JSON_TYPES = {"str": "string", "string": "string", "text": "string", "int": "integer", "integer": "integer",
               "float": "number", "number": "number", "bool": "boolean", "boolean": "boolean",
               "list": "array", "array": "array", "dict": "object", "object": "object"}


def fields_schema(fields: Any, nullable: bool = True) -> dict[str, Any]:
    """A JSON Schema for an object from simple field specs {NAME: {type, description, enum?}}
    (types: string/str, integer/int, number/float, boolean/bool, array/list[...], object/dict)."""
    properties: dict[str, Any] = {}
    for name, spec in dict(fields or {}).items():
        spec = spec if isinstance(spec, dict) else {"type": spec}
        declared = str(spec.get("type", "")).strip().lower()
        base = declared.split("[", 1)[0]
        prop: dict[str, Any] = {}
        if base in _JSON_TYPES:
            kind = _JSON_TYPES[base]
            prop["type"] = [kind, "null"] if nullable else kind
            inner = declared[len(base) + 1:-1] if "[" in declared and declared.endswith("]") else ""
            if kind == "array" and inner in _JSON_TYPES:
                prop["items"] = {"type": _JSON_TYPES[inner]}
        if spec.get("enum"):
            prop["enum"] = list(spec["enum"]) + ([None] if nullable else [])
        if spec.get("description"):
            prop["description"] = str(spec["description"])
        properties[str(name)] = prop
    return {"type": "object", "required": list(properties), "properties": properties}


def dict_from(rows: Any, key: str, value: str | None = None) -> dict[str, Any]:
    """A list of mappings as a mapping keyed by one field (to `value`, or the whole row)."""
    return {row[key]: (row.get(value) if value else row) for row in rows or [] if isinstance(row, dict)}


def pick(row: Any, keys: list[str]) -> dict[str, Any]:
    """Only the named keys of a mapping."""
    return {k: row[k] for k in keys if isinstance(row, dict) and k in row}


def pluck_values(mapping: Any, key: str) -> dict[str, Any]:
    """{k: v[key]} for nested values, other values kept as they are."""
    return {k: (v[key] if isinstance(v, dict) and key in v else v) for k, v in dict(mapping or {}).items()}


def length(value: Any) -> int:
    """len(); and for a lazy chain such as `results | selectattr('verified')`, its element count
    (counted as it streams, so a summary over a big run need not build a list)."""
    if not hasattr(value, "__len__") and hasattr(value, "__iter__"):
        return sum(1 for _ in value)
    return len(value)


RUNNER_FILTERS: dict[str, Callable[..., Any]] = dict(
    normalize=normalize, normalize_html=normalize_html, sha256=sha256, regex_findall=regex_findall,
    regex_search=regex_search, clamp=clamp, tojson=tojson, fields_schema=fields_schema, dict_from=dict_from,
    pick=pick, pluck_values=pluck_values, length=length, count=length, sentences=split_sentences, mean=mean)

ENTRY_GROUP = "runner.filters"
PLUGIN_FILTERS: dict[str, Callable[..., Any]] = {}
BUILTIN_FILTERS: set[str] = {*jinja2.filters.FILTERS, *RUNNER_FILTERS}       # names a plugin may not take
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
