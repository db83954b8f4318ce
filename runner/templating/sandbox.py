"""The one sandboxed Jinja environment, and rendering of templated values.

A string that is exactly one `{{ expr }}` yields the expression's native value; any
other string holding `{{` or `{%` renders to text; `if:`/`when:` are bare expressions.
Input data is only ever passed in as values, never compiled as a template.

Jinja's compiled code of each template or bare expression is made once per text in a process
(`compiled_code`): compiling (parse, code generation, Python's compile) is most of a short run's
template cost, and the code depends on the text and the environment's class and options only,
never on its prompt folder, so a probe, a sweep, align or a server, which run one pipeline many
times in one process, compile each of its templates once."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from functools import lru_cache
from pathlib import Path
from types import CodeType
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.environment import TemplateExpression
from jinja2.parser import Parser
from jinja2.sandbox import SandboxedEnvironment

from runner.fileio import now
from runner.paths import OK, resolve_inside
from runner.templating.filters import BUILTIN_FILTERS, RUNNER_FILTERS, FilterTable
from runner.templating.limits import BoundedSandbox, ReadOnlySandbox, bounded_join, guard, past_the_parser

_SINGLE_EXPR = re.compile(r"^\s*\{\{(?P<expr>(?:(?!\{\{|\}\}).)*)\}\}\s*$", re.DOTALL)
MAX_CODES = 4096        # compiled templates kept for the process (a run uses tens)
_CODES: dict[tuple[Any, ...], CodeType] = {}


def is_template(value: object) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def single_expression(value: str) -> str | None:
    """The inner expression when `value` is exactly one `{{ expr }}`."""
    match = _SINGLE_EXPR.match(value)
    return match.group("expr").strip() if match else None


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

def compiled_code(env: jinja2.Environment, text: str, expression: bool = False, name: str | None = None,
                  filename: str | None = None) -> CodeType:
    """The Python code Jinja makes of a template (a prompt file's has its `name` and `filename`),
    or (`expression`) of a bare expression as its compile_expression does."""
    key = (type(env), env.trim_blocks, env.lstrip_blocks, env.keep_trailing_newline, env.newline_sequence,
           env.optimized, env.autoescape, env.finalize, text, expression, name, filename)
    code = _CODES.get(key)
    if code is None:
        tree = _expression_template(env, text) if expression else env.parse(text, name, filename)
        # Jinja calls a filter on constants while compiling: a plugin's filter may answer
        # differently in the next run (a date, a file), so a template naming one is not kept.
        kept = all(node.name in BUILTIN_FILTERS for node in tree.find_all(nodes.Filter))
        code = env.compile(tree, name, filename)
        if kept:
            if len(_CODES) >= MAX_CODES:
                _CODES.clear()
            _CODES[key] = code
    return code


def _expression_template(env: jinja2.Environment, text: str) -> nodes.Template:
    """`result = <text>`: the template Environment.compile_expression compiles."""
    parser = Parser(env, text, state="variable")
    try:
        expression = parser.parse_expression()
        if not parser.stream.eos:
            raise jinja2.TemplateSyntaxError("chunk after expression", parser.stream.current.lineno, None, None)
    except jinja2.TemplateSyntaxError:
        env.handle_exception(source=text)
    expression.set_environment(env)
    return nodes.Template([nodes.Assign(nodes.Name("result", "store"), expression, lineno=1)], lineno=1)


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


# ---- the values steps give later steps and templates ----------------------------------------
# result_shapes.py makes them from values runner already checked, so a template that reads one
# finds nothing undefined inside (_defined does not walk them).

class Result(dict[str, Any]):
    """A step's result (a mapping) as templates read it: `steps.X.skipped` is false."""

    skipped = False


class ResultList(list[Any]):
    """A step's result (a list) as templates read it; a step that makes LLM calls also tells
    how many (`steps.X.calls`, `steps.X.attempts`), as its mapping results do in their fields."""

    skipped = False
    calls = 0
    attempts = 0


class Empty(dict[str, Any]):
    """The empty value of an object: its known fields, each empty; false in a condition."""

    def __bool__(self) -> bool:
        return False


class Skipped(Empty):
    """What a skipped step reads as: the empty value of its result, `skipped` true."""

    skipped = True


class SkippedList(ResultList):
    """What a skipped step whose result is a list reads as: empty, `skipped` true."""

    skipped = True


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
