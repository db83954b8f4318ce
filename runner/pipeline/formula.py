"""Arithmetic formulas over named numbers, as OpenAI's multi grader writes its
`calculate_output` (`0.5 * fuzzy + 0.5 * judge`), evaluated without eval(): the text is parsed
with `ast` and only numbers, the names given, + - * / (and `^` or `**` for a power), unary
minus, parentheses and the functions min, max, abs, floor, ceil, exp, sqrt and log are
allowed. Anything else is refused with what it is, before the run where the formula is known."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any

BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.Pow: operator.pow, ast.BitXor: operator.pow,          # OpenAI writes a power as ^
}
UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
# Each function, and the arguments it takes: at least, at most.
FUNCTIONS: dict[str, tuple[Callable[..., float], int, int | None]] = {
    "min": (min, 2, None), "max": (max, 2, None), "abs": (abs, 1, 1), "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1), "exp": (math.exp, 1, 1), "sqrt": (math.sqrt, 1, 1), "log": (math.log, 1, 2),
}
LONGEST = 2000          # characters of a formula
BIGGEST_POWER = 1000.0  # an exponent's bound: no formula computes a number of a million digits


class FormulaError(ValueError):
    """A formula that is not allowed, or cannot be computed on these values."""


def parse_formula(text: str, names: Iterable[str]) -> ast.expr:
    """The checked tree of `text`, whose names must be among `names` (FormulaError says what is wrong)."""
    if len(text) > LONGEST:
        raise FormulaError(f"a formula of {len(text)} characters: at most {LONGEST}")
    try:
        tree = ast.parse(text.replace("^", "**"), mode="eval").body
    except SyntaxError as exc:
        raise FormulaError(f"not a formula: {exc.msg}") from None
    known = set(names)
    for node in ast.walk(tree):
        _check_node(node, known)
    return tree


def _check_node(node: ast.AST, known: set[str]) -> None:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise FormulaError(f"{node.value!r}: only numbers are allowed")
    elif isinstance(node, ast.Name):
        if node.id not in known and node.id not in FUNCTIONS:
            raise FormulaError(f"unknown name '{node.id}' (known: {', '.join(sorted(known)) or 'none'})")
    elif isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS or node.keywords:
            raise FormulaError(f"only the functions {', '.join(FUNCTIONS)} may be called, with plain arguments")
        _, least, most = FUNCTIONS[node.func.id]
        if len(node.args) < least or (most is not None and len(node.args) > most):
            takes = f"{least} or more" if most is None else str(least) if least == most else f"{least} or {most}"
            raise FormulaError(f"{ast.unparse(node)}: {node.func.id}() takes {takes} argument(s), "
                               f"not {len(node.args)}")
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in BINARY:
            raise FormulaError(f"operator {type(node.op).__name__} is not allowed (+ - * / ^ are)")
    elif isinstance(node, ast.UnaryOp):
        if type(node.op) not in UNARY:
            raise FormulaError(f"operator {type(node.op).__name__} is not allowed")
    elif not isinstance(node, (ast.Load, ast.operator, ast.unaryop)):
        raise FormulaError(f"{type(node).__name__} is not allowed in a formula (numbers, names, + - * / ^, "
                           f"{', '.join(FUNCTIONS)})")


def evaluate(text: str, values: Mapping[str, Any]) -> float:
    """The formula's number on these values (each a number, or a boolean as 1 or 0); a result
    that is no real, finite number (`(a - 1) ^ 0.5` below 1 is complex, `a * 1e308` is inf)
    is a FormulaError saying what the formula gave, on which values."""
    numbers = {name: _number(name, value) for name, value in values.items()}
    tree = parse_formula(text, numbers)
    on = ", ".join(f"{name}={number:g}" for name, number in numbers.items())
    try:
        value = _value(tree, numbers)
    except (ArithmeticError, ValueError, TypeError) as exc:
        raise FormulaError(f"{text} with {on or 'no values'}: {exc}") from None
    if not math.isfinite(value):
        raise FormulaError(f"{text} with {on or 'no values'} gives {value}, not a finite number")
    return value


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    try:
        return float(value)
    except (TypeError, ValueError):
        raise FormulaError(f"'{name}' is {value!r}, not a number") from None


def _value(node: ast.expr, numbers: Mapping[str, float]) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.Name):
        return numbers[node.id]
    if isinstance(node, ast.UnaryOp):
        return UNARY[type(node.op)](_value(node.operand, numbers))
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left, numbers), _value(node.right, numbers)
        if type(node.op) in (ast.Pow, ast.BitXor) and abs(right) > BIGGEST_POWER:
            raise FormulaError(f"an exponent of {right}: at most {BIGGEST_POWER}")
        value = BINARY[type(node.op)](left, right)
        if isinstance(value, complex):          # a negative number to a fractional power: no score is complex
            raise FormulaError(f"{ast.unparse(node)} is the complex number {value:g}: a negative number to a "
                               "fractional power")
        return float(value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return float(FUNCTIONS[node.func.id][0](*(_value(arg, numbers) for arg in node.args)))
    raise FormulaError(f"{type(node).__name__} is not allowed in a formula")

