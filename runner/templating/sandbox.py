"""The one sandboxed Jinja environment, and rendering of templated values.

A string that is exactly one `{{ expr }}` yields the expression's native value; any
other string holding `{{` or `{%` renders to text; `if:`/`when:` are bare expressions.
Input data is only ever passed in as values, never compiled as a template."""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
import uuid
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.environment import TemplateExpression
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from runner.fileio import now
from runner.paths import OK, resolve_inside
from runner.templating.compiled import compiled_code
from runner.templating.filters import BUILTIN_FILTERS, FilterTable
from runner.templating.limits import BoundedSandbox, ReadOnlySandbox, bounded_join, guard, past_the_parser, tojson
from runner.templating.step_results import Empty, Result, ResultList
from runner.text.sentences import split_sentences

_SINGLE_EXPR = re.compile(r"^\s*\{\{(?P<expr>(?:(?!\{\{|\}\}).)*)\}\}\s*$", re.DOTALL)
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)

def is_template(value: object) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def single_expression(value: str) -> str | None:
    """The inner expression when `value` is exactly one `{{ expr }}`."""
    match = _SINGLE_EXPR.match(value)
    return match.group("expr").strip() if match else None


# ---- filters -----------------------------------------------------------------

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


class StrictChainableUndefined(jinja2.ChainableUndefined, jinja2.StrictUndefined):
    """Undefined that may be chained (`steps.x.output.field | default(...)` when step x
    did not run) but fails on any real use: printing, comparing, testing, iterating."""

    __slots__ = ()

    def _fail_with_undefined_error(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super()._fail_with_undefined_error(*args, **kwargs)
        except jinja2.UndefinedError as exc:
            raise MissingName(exc.message or "", self._undefined_obj, self._undefined_name) from None


class MissingName(jinja2.UndefinedError):
    """An undefined name or key, with the object it was looked up on (for the message)."""

    def __init__(self, message: str, owner: Any, name: str | None):
        super().__init__(message)
        self.owner = owner
        self.name = name


class ConfinedLoader(jinja2.FileSystemLoader):
    """Prompt files from the prompts folder only: a symlink out of it, a device or a FIFO
    is not found (Jinja's own loader already refuses `..`)."""

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        if resolve_inside(Path(self.searchpath[0]), template)[1] != OK:
            raise jinja2.TemplateNotFound(template)
        return super().get_source(environment, template)

    def load(self, environment: jinja2.Environment, name: str,
             globals: MutableMapping[str, Any] | None = None) -> jinja2.Template:
        """Jinja's load, with the file's code from compiled_code (once per text in a process)."""
        source, filename, uptodate = self.get_source(environment, name)
        code = compiled_code(environment, source, name=name, filename=filename)
        return environment.template_class.from_code(environment, code, globals or {}, uptodate)


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
BUILTIN_FILTERS.update(RUNNER_FILTERS)


def make_environment(template_dir: Path | None = None, read_only: bool = False) -> SandboxedEnvironment:
    """The sandboxed environment of every template: Jinja's filters, runner's, and the
    plugins' (looked up when a template names a filter neither has)."""
    loader = ConfinedLoader(str(template_dir)) if template_dir else None
    sandbox = ReadOnlySandbox if read_only else BoundedSandbox
    # auto_reload off: a prompt file is read once per run, not stat-ed again for every call.
    env = sandbox(undefined=StrictChainableUndefined, loader=loader, autoescape=False,
                         keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, auto_reload=False)
    env.filters.update(RUNNER_FILTERS)
    guard(env)
    env.filters = FilterTable(env.filters)
    from runner.text.quotes import quote_match_function
    env.globals.update(quote_match=quote_match_function, now=now, uuid=lambda: uuid.uuid4().hex)
    return env


# ---- compiled templates --------------------------------------------------------

class Renderer:
    """Compiles templated strings once and renders them with a scope."""

    def __init__(self, template_dir: Path | None = None, read_only: bool = False):
        self.env = make_environment(template_dir, read_only)
        self._compiled: dict[tuple[str, bool], Callable[[Mapping[str, Any]], Any]] = {}

    def _compile(self, source: str, condition: bool) -> Callable[[Mapping[str, Any]], Any]:
        """`source` made once into a function of the scope: a templated value, or (`condition`)
        an `if:`/`when:` value, which may also be a bare expression without braces."""
        key = (source, condition)
        fn = self._compiled.get(key)
        if fn is None:
            expr = single_expression(source)
            if expr is None and condition and not is_template(source):
                expr = source
            code = compiled_code(self.env, source if expr is None else expr, expr is not None)
            template = self.env.template_class.from_code(self.env, code, self.env.make_globals(None), None)
            if expr is not None:
                compiled = TemplateExpression(template, undefined_to_none=False)
                fn = lambda scope, c=compiled: _defined(c(scope))  # noqa: E731
            else:
                fn = lambda scope, t=template: bounded_join(t.generate(scope), "the text")  # noqa: E731
            self._compiled[key] = fn
        return fn

    def value(self, value: Any, scope: Mapping[str, Any]) -> Any:
        """Render a templated value (recursing into lists and dicts)."""
        if isinstance(value, str):
            return self._compile(value, False)(scope) if is_template(value) else value
        if isinstance(value, dict):
            return {k: self.value(v, scope) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v, scope) for v in value]
        return value

    def condition(self, expr: Any, scope: Mapping[str, Any]) -> bool:
        """An `if:`/`when:` value: a bare expression, a `{{ }}` template, or a literal."""
        if isinstance(expr, str):
            return bool(self._compile(expr, True)(scope))
        return bool(expr)

    def file(self, name: str, scope: Mapping[str, Any]) -> str:
        return bounded_join(self.env.get_template(name).generate(scope), "the text")


def _defined(value: Any) -> Any:
    """`value`, or the error of the first undefined (or sandbox-refused) value inside it:
    a dict or list holding one would otherwise fail only when results are written."""
    if not isinstance(value, (dict, list, tuple, jinja2.Undefined)):
        return value            # a plain value, as most are: nothing inside to look at
    pending, seen = [value], set()
    while pending:
        current = pending.pop()
        if isinstance(current, (Result, ResultList, Empty)):
            continue                      # a step's value, read as it is: runner made it whole
        if isinstance(current, (dict, list, tuple)):
            if id(current) not in seen:
                seen.add(id(current))     # a list may hold itself (`x.append(x)`)
                pending.extend(current.values() if isinstance(current, dict) else current)
        elif isinstance(current, jinja2.Undefined):
            current._fail_with_undefined_error()
    return value


def describe_error(exc: BaseException, steps: Mapping[str, Any] | None = None) -> str:
    """A one-line account of a template failure; a key missing from a step's result names
    the step (found in `steps`) and the keys it has."""
    if isinstance(exc, jinja2.TemplateSyntaxError):
        return f"template syntax error: {exc.message} (template line {exc.lineno})"
    if isinstance(exc, MissingName) and isinstance(exc.owner, Mapping):
        keys = ", ".join(sorted(map(str, exc.owner))) or "none"
        step = next((name for name, result in (steps or {}).items() if result is exc.owner), None)
        if step is not None:
            return f"undefined: step '{step}' has no field '{exc.name}' (its fields: {keys})"
        return f"undefined: {exc.message} (its keys: {keys})"
    if isinstance(exc, jinja2.UndefinedError):
        return f"undefined: {exc.message}"
    if isinstance(exc, jinja2.exceptions.SecurityError):
        return f"refused by the sandbox: {exc}"
    return f"{type(exc).__name__}: {exc}"


# ---- static analysis -------------------------------------------------------------

@lru_cache(maxsize=4096)
def parse_source(source: str, bare: bool) -> nodes.Template:
    """Parse a template or bare expression (raises TemplateSyntaxError). One tree per text in a
    process, shared by every check that reads it (none changes it)."""
    try:
        return _PARSE_ENV.parse("{{ " + source + " }}" if bare else source)
    except (ValueError, RecursionError) as exc:     # a number past the digit limit, brackets nested too deeply
        raise past_the_parser(source, exc) from None


_PARSE_ENV = make_environment()


def parsed(value: Any, bare: bool | None = None) -> nodes.Template | None:
    """`parse_source` of a string (`bare` None: bare unless it holds `{{` or `{%`); None for
    anything else, and for a syntax error (the template checks say it)."""
    if not isinstance(value, str):
        return None
    try:
        return parse_source(value, not is_template(value) if bare is None else bare)
    except jinja2.TemplateSyntaxError:
        return None


@lru_cache(maxsize=4096)
def _descendants(tree: nodes.Node) -> tuple[nodes.Node, ...]:
    return tuple(tree.find_all(nodes.Node))


def find_all(tree: nodes.Node, kinds: type | tuple[type, ...]) -> Iterator[Any]:
    """`tree.find_all(kinds)`, in the same order, from one walk of a tree however many kinds the checks ask for."""
    return (node for node in _descendants(tree) if isinstance(node, kinds))


def attribute_chain(node: nodes.Node) -> tuple[nodes.Node, list[str | None]]:
    """The node a chain of reads (`x.a['b']`) starts from, and the names it reads in order (None
    for a key computed at render time)."""
    chain: list[str | None] = []
    while isinstance(node, (nodes.Getattr, nodes.Getitem)):
        if isinstance(node, nodes.Getattr):
            chain.append(node.attr)
        else:
            chain.append(node.arg.value if isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str)
                         else None)
        node = node.node
    return node, chain[::-1]


def attribute_refs(tree: nodes.Node, root: str) -> Iterator[str]:
    """Names read as `root.X` or `root['X']`."""
    for node in find_all(tree, (nodes.Getattr, nodes.Getitem)):
        if isinstance(node.node, nodes.Name) and node.node.name == root:
            name = attribute_chain(node)[1][0]
            if name is not None:
                yield name
