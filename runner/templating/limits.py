"""Size guards for the template sandbox: every operator, filter, global and method that can
build a string or list far larger than its inputs is refused before it runs when its result
would pass MAX_ELEMENTS (so `item.claim | center(2500000000)` fails its item instead of
allocating 2.5 GB)."""

from __future__ import annotations

import json
import math
import re
import string
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sized
from functools import wraps
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment, modifies_known_mutable

from runner.fileio import TOO_MANY_DIGITS

MAX_ELEMENTS = 10_000_000         # characters of a string, elements of a list
# Digits of an integer: under the 4,300 `sys.get_int_max_str_digits()` lets int -> str write, so
# a result holding one can still be written; an item past it fails at the operator that makes it.
MAX_INT_DIGITS = 4_200
MAX_LIPSUM_WORDS = 100_000        # lipsum(n=300000) ran for minutes
MAX_JSON_INDENT = 64

_SEQUENCES = (str, list, tuple, bytes)
_DICT_ATTRIBUTES = frozenset(dir(dict))
# A %-conversion: flags, then width and precision (digits or `*`, taken from the arguments).
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?[a-zA-Z%]")
_DIGITS = re.compile(r"\d+")

Estimate = tuple[int, int, str]     # (estimated size, limit, unit)


def refuse_if_huge(what: str, estimate: Estimate | None) -> None:
    if estimate is not None and estimate[0] > estimate[1]:
        raise SecurityError(f"{what} would produce {estimate[0]:,} {estimate[2]} (the limit is {estimate[1]:,})")


def binop_size(operator: str, left: Any, right: Any) -> Estimate | None:
    """(estimated size, limit, unit) of `left <operator> right`, when it can be large."""
    if operator == "+" and isinstance(left, _SEQUENCES) and isinstance(right, _SEQUENCES):
        return len(left) + len(right), MAX_ELEMENTS, "elements"
    if operator == "*" and isinstance(left, _SEQUENCES) and isinstance(right, int):
        return len(left) * right, MAX_ELEMENTS, "elements"
    if operator == "*" and isinstance(right, _SEQUENCES) and isinstance(left, int):
        return len(right) * left, MAX_ELEMENTS, "elements"
    if operator == "*" and isinstance(left, int) and isinstance(right, int) and left and right:
        return _digits(left) + _digits(right), MAX_INT_DIGITS, "digits"
    if operator == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and right > 0:
        return math.floor(right * math.log10(abs(left))) + 1, MAX_INT_DIGITS, "digits"
    if operator == "%" and isinstance(left, str):
        return percent_size(left, right), MAX_ELEMENTS, "characters"
    return None


def _digits(number: int) -> int:
    """The decimal digits of `number`, at most one too many (from its bits: no conversion)."""
    return math.floor(abs(number).bit_length() * math.log10(2)) + 1


def _numbers(values: Any) -> list[int]:
    return [value for value in values if isinstance(value, int) and not isinstance(value, bool)]


def _text_size(value: Any) -> int:
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 1e18:
        return len(str(value))
    return len(repr(value)) if isinstance(value, Sized) else 24


def percent_size(template: str, arguments: Any) -> int:
    """An upper estimate of `template % arguments`: widths and precisions are what can
    make it huge (`'%2500000000d' % 1`); a `*` takes its number from the arguments."""
    values = list(arguments) if isinstance(arguments, tuple) else [arguments]
    size = len(template) + sum(_text_size(value) for value in values)
    if isinstance(arguments, Mapping):
        size += sum(_text_size(value) for value in arguments.values())
    for match in _PERCENT_SPEC.finditer(template):
        for number in match.groups():
            if number == "*":
                size += max(_numbers(values), default=0)
            elif number:
                size += int(number)
    return size


def format_size(template: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> int:
    """An upper estimate of `template.format(*args, **kwargs)`: fields' widths (also nested
    ones such as `{:{w}}`) and the arguments' own sizes."""
    values = list(args) + list(kwargs.values())
    size = len(template) + sum(_text_size(value) for value in values)
    for _, _, spec, _ in string.Formatter().parse(template):
        if spec:
            size += sum(int(number) for number in _DIGITS.findall(spec))
            if "{" in spec:
                size += max(_numbers(values), default=0)
    return size


# ---- filters, globals and methods ----------------------------------------------------


def _lines(text: Any) -> int:
    return str(text).count("\n") + 1


def _width(value: Any) -> int:
    return value if isinstance(value, int) else len(str(value))


def _join_size(value: Any, d: str = "", attribute: Any = None) -> int:
    items = list(value) if isinstance(value, (list, tuple, set, frozenset, dict)) else []
    return sum(_text_size(item) for item in items) + len(str(d)) * max(len(items) - 1, 0)


def _replace_size(s: Any, old: Any, new: Any, count: Any = None) -> int:
    text, old, new = str(s), str(old), str(new)
    found = text.count(old) if old else len(text) + 1
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    return len(text) + found * max(len(new) - len(old), 0)


def _sum_size(iterable: Any, attribute: Any = None, start: Any = 0) -> int:
    """`[[...]] | sum(start=[])` concatenates: the elements of every list, not the count of lists."""
    if not isinstance(start, (list, tuple, str)) or attribute is not None:
        return 0
    return len(start) + sum(len(part) for part in iterable if isinstance(part, (list, tuple, str)))


def _translate_size(s: str, table: Any) -> int:
    if not isinstance(table, Mapping):
        return len(s)
    longest = max((len(value) for value in table.values() if isinstance(value, str)), default=1)
    return len(s) * max(longest, 1)


# name -> the estimated size of its result, from its arguments bound by name (no context).
FILTER_SIZES: dict[str, Callable[..., int]] = {
    "center": lambda value, width=80: max(len(str(value)), _width(width)),
    "indent": lambda s, width=4, first=False, blank=False: len(str(s)) + _lines(s) * _width(width),
    "format": lambda value, *args, **kwargs: percent_size(str(value), kwargs or tuple(args)),
    "wordwrap": lambda s, width=79, break_long_words=True, wrapstring=None, break_on_hyphens=True:
        len(str(s)) + (len(str(s)) // max(_width(width), 1) + _lines(s)) * len(wrapstring or "\n"),
    "replace": _replace_size,
    "join": _join_size,
    "truncate": lambda s, length=255, killwords=False, end="...", leeway=None: len(str(s)) + len(str(end)),
    "batch": lambda value, linecount, fill_with=None: _width(linecount),
    "slice": lambda value, slices, fill_with=None: _width(slices),
    "sum": _sum_size,
}


def bounded_join(chunks: Iterable[str], what: str) -> str:
    """The chunks of a rendered text or a JSON dump joined, refused once they pass MAX_ELEMENTS
    characters (nested loops, or an indent repeated on every line, build gigabytes quickly)."""
    parts, size = [], 0
    for chunk in chunks:
        size += len(chunk)
        if size > MAX_ELEMENTS:
            raise SecurityError(f"{what} would pass {MAX_ELEMENTS:,} characters")
        parts.append(chunk)
    return "".join(parts)


def tojson(value: Any, indent: int | None = None) -> str:
    """JSON text of a value, with non-ASCII characters kept as they are."""
    # Jinja's own tojson HTML-escapes <, >, & and ': wrong for prompts.
    if indent is not None:
        refuse_if_huge("tojson's indent", (indent, MAX_JSON_INDENT, "spaces"))
    return bounded_join(json.JSONEncoder(ensure_ascii=False, indent=indent, default=str).iterencode(value), "tojson")


def guard(env: jinja2.Environment) -> None:
    """Replace each size-building filter, and lipsum(), by one that refuses a huge result before running."""
    for name, size in FILTER_SIZES.items():
        if name in env.filters:
            env.filters[name] = _guarded(f"filter '{name}'", env.filters[name], size, MAX_ELEMENTS, "elements")
    env.globals["lipsum"] = _guarded("lipsum()", env.globals["lipsum"], _lipsum_words,  # type: ignore[arg-type]
                                     MAX_LIPSUM_WORDS, "words")


def _lipsum_words(n: Any = 5, html: Any = True, min: Any = 20, max: Any = 100) -> int:   # Jinja's arguments
    return n * max if isinstance(n, int) and isinstance(max, int) else 0


def _guarded(what: str, function: Callable[..., Any], size: Callable[..., int], limit: int,
             unit: str) -> Callable[..., Any]:
    skip = 1 if getattr(function, "jinja_pass_arg", None) is not None else 0

    @wraps(function)
    def checked(*args: Any, **kwargs: Any) -> Any:
        if len(args) > skip and isinstance(args[skip], Iterator):
            args = (*args[:skip], list(args[skip]), *args[skip + 1:])    # an iterator, counted once
        try:
            estimate = size(*args[skip:], **kwargs)
        except (TypeError, ValueError):
            estimate = 0             # bad arguments: the function itself says what is wrong
        refuse_if_huge(what, (estimate, limit, unit))
        return function(*args, **kwargs)
    return checked


_STR_METHODS: dict[str, Callable[..., int]] = {
    **dict.fromkeys(("center", "ljust", "rjust", "zfill"), lambda s, width, fillchar=" ": max(len(s), _width(width))),
    "expandtabs": lambda s, tabsize=8: len(s) + s.count("\t") * _width(tabsize),
    "replace": _replace_size,
    "join": lambda s, iterable: _join_size(iterable, s),
    "translate": _translate_size,
}


def method_size(method: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Estimate | None:
    """The size of a call to a str method that can grow its text, or of `list.extend`."""
    owner, name = getattr(method, "__self__", None), getattr(method, "__name__", "")
    try:
        if isinstance(owner, str) and name in _STR_METHODS:
            return _STR_METHODS[name](owner, *args, **kwargs), MAX_ELEMENTS, "characters"
        if isinstance(owner, list) and name == "extend" and args and isinstance(args[0], Sized):
            return len(owner) + len(args[0]), MAX_ELEMENTS, "elements"
    except (TypeError, ValueError):
        return None
    return None


class BoundedSandbox(SandboxedEnvironment):
    """The sandbox, with every operator, filter, global and method that can build a huge
    string or list refused when its result would pass MAX_ELEMENTS (this module)."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def make_globals(self, d: MutableMapping[str, Any] | None) -> MutableMapping[str, Any]:
        # One plain dict, not Jinja's ChainMap (every render copies it, walking a ChainMap map by
        # map): make_environment sets every global before the first template, so a copy sees them.
        return {**self.globals, **(d or {})}

    def getattr(self, obj: Any, attribute: str) -> Any:
        # `item.claim` on a plain dict: Jinja tries the attribute first, raising and catching an
        # AttributeError each time; a name no dict has goes straight to the key (same answer).
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                return self.undefined(obj=obj, name=attribute)
        return super().getattr(obj, attribute)

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        refuse_if_huge(f"'{operator}'", binop_size(operator, left, right))
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: jinja2.runtime.Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        refuse_if_huge(f"{getattr(__obj, '__name__', 'the call')}()", method_size(__obj, args, kwargs))
        return super().call(__context, __obj, *args, **kwargs)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        template, is_map = value.__self__, value.__name__ == "format_map"

        def checked(*args: Any, **kwargs: Any) -> str:
            arguments = args[0] if is_map and len(args) == 1 and isinstance(args[0], Mapping) else kwargs
            size = format_size(template, () if is_map else args, arguments)
            refuse_if_huge(f"{value.__name__}()", (size, MAX_ELEMENTS, "characters"))
            return wrapped(*args, **kwargs)
        return checked

    def bounded_concat(self, join: Callable[[Any], str], parts: tuple[Any, ...]) -> str:
        size = sum(len(part) if isinstance(part, str) else len(str(part)) for part in parts)
        refuse_if_huge("'~'", (size, MAX_ELEMENTS, "characters"))
        return join(parts)


class _BoundedCodeGenerator(CodeGenerator):
    """`a ~ b` compiles to a join the sandbox never sees: route it through bounded_concat."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.bounded_concat(")
        if frame.eval_ctx.volatile:
            self.write("(markup_join if context.eval_ctx.volatile else str_join)")
        else:
            self.write("markup_join" if frame.eval_ctx.autoescape else "str_join")
        self.write(", (")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


BoundedSandbox.code_generator_class = _BoundedCodeGenerator


class ReadOnlySandbox(BoundedSandbox):
    """The bounded sandbox without the methods that change a list, dict, set or deque in
    place (`item.update(...)`): for expressions that only choose, such as `--filter`."""

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        return super().is_safe_attribute(obj, attr, value) and not modifies_known_mutable(obj, attr)


def past_the_parser(source: str, exc: ValueError | RecursionError) -> jinja2.TemplateSyntaxError:
    """What Jinja's parser could not take, at its line: an integer literal past Python's digit
    limit (a ValueError), or brackets nested past its recursion (a few hundred levels)."""
    if isinstance(exc, RecursionError):
        depth = deepest = at = 0
        for position, char in enumerate(source):
            depth += (char in "([{") - (char in ")]}")
            if depth > deepest:
                deepest, at = depth, position
        return jinja2.TemplateSyntaxError("nested too deeply for the template parser", source.count("\n", 0, at) + 1)
    number = re.search(rf"\d{{{sys.get_int_max_str_digits() + 1},}}", source)
    return jinja2.TemplateSyntaxError(TOO_MANY_DIGITS, source.count("\n", 0, number.start()) + 1 if number else 1)
