"""Jinja's compiled code of a template or a bare expression, made once per text in a process.

Compiling (parse, code generation, Python's compile) is most of a short run's template cost,
and the code depends on the text and the environment's class and options only, never on its
prompt folder: a probe, a sweep, align or a server, which run one pipeline many times in one
process, compile each of its templates once."""

from __future__ import annotations

from types import CodeType
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.parser import Parser

from runner.templating.filters import BUILTIN_FILTERS

MAX_CODES = 4096        # compiled templates kept for the process (a run uses tens)
_CODES: dict[tuple[Any, ...], CodeType] = {}


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
