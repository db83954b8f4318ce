"""Static checks of templates that Jinja's parser leaves to the first render: unknown filter
and test names (also those named as strings, `map('trimm')`), the templates an `include`,
`import` or `extends` names, and the result fields `summary` and `report_columns` read."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import jinja2
from jinja2 import nodes

import runner.templating.sandbox as templating
from runner.errors import unknown
from runner.yamlpos import Path as DataPath

# Filters whose string argument at this position names a filter or a test.
_NAMED_CALLABLES = {"map": (0, "filter"), "select": (0, "test"), "reject": (0, "test"),
                    "selectattr": (1, "test"), "rejectattr": (1, "test")}
# Fields runner adds to an item's result besides the pipeline's output.
RESULT_EXTRAS = frozenset({"index", "error", "warnings", "mlflow_trace_id"})
_KEYWORDS = {nodes.Include: "include", nodes.Import: "import", nodes.FromImport: "import", nodes.Extends: "extends"}


def unknown_callables(tree: nodes.Template, env: jinja2.Environment) -> Iterator[tuple[int, str]]:
    """(template line, message) for each filter or test name the environment does not know."""
    for node in tree.find_all((nodes.Filter, nodes.Test)):
        is_filter = isinstance(node, nodes.Filter)
        known: Mapping[str, Any] = env.filters if is_filter else env.tests
        if node.name not in known:
            yield node.lineno, unknown("filter" if is_filter else "test", node.name, known)
            continue
        named = _NAMED_CALLABLES.get(node.name) if is_filter else None
        if named is None or any(keyword.key == "attribute" for keyword in node.kwargs):
            continue
        position, kind = named
        argument = node.args[position] if len(node.args) > position else None
        if isinstance(argument, nodes.Const) and isinstance(argument.value, str):
            table: Mapping[str, Any] = env.filters if kind == "filter" else env.tests
            if argument.value not in table:
                yield node.lineno, unknown(kind, argument.value, table)


@dataclass
class Reference:
    """A template another one names: found and parsed, or what is wrong with it."""

    keyword: str             # include, import or extends
    name: str
    line: int                # in the template that names it
    shares_context: bool     # sees the names of the template that names it
    tree: nodes.Template | None = None
    problem: str | None = None


def referenced_templates(tree: nodes.Template, env: jinja2.Environment) -> Iterator[Reference]:
    """Every template named by a literal in `include`, `import` or `extends` (a name built at
    render time is checked when it renders)."""
    for node in tree.find_all(tuple(_KEYWORDS)):
        target = getattr(node, "template", None)
        if not (isinstance(target, nodes.Const) and isinstance(target.value, str)):
            continue
        keyword = _KEYWORDS[type(node)]
        shares = keyword == "extends" or bool(getattr(node, "with_context", False))
        reference = Reference(keyword, str(target.value), node.lineno, shares)
        try:
            if env.loader is None:
                raise jinja2.TemplateNotFound(target.value)
            source = env.loader.get_source(env, target.value)[0]
        except jinja2.TemplateNotFound:
            if not getattr(node, "ignore_missing", False):
                reference.problem = "not found in the prompts folder"
                yield reference
            continue
        except (OSError, UnicodeDecodeError) as exc:
            reference.problem = f"unreadable ({type(exc).__name__})"
            yield reference
            continue
        try:
            reference.tree = env.parse(source)
        except jinja2.TemplateSyntaxError as exc:
            reference.problem = f"line {exc.lineno}: {exc.message}"
        yield reference


def result_field_problems(data: dict[str, Any]) -> Iterator[tuple[DataPath, str]]:
    """`summary.rates` reading `result.X`, and `count_by` and `report_columns` naming a field,
    where X is not one of the pipeline's output fields (unless output_base makes them open)."""
    summary = data.get("summary")
    output = data.get("output")
    if not isinstance(summary, dict) or data.get("output_base") is not None or not isinstance(output, dict):
        return
    fields = set(output) | RESULT_EXTRAS
    for name, expression in (summary.get("rates") or {}).items():
        if not isinstance(expression, str):
            continue
        bare = not templating.is_template(expression)
        try:
            tree = templating.parse_source(expression, bare)
        except jinja2.TemplateSyntaxError:
            continue            # said by the template checks
        for field, _ in templating.attribute_refs(tree, "result"):
            if field not in fields:
                yield ("summary", "rates", name), f"result.{field}: " + unknown("output field", field, fields,
                                                                                  "output fields")
    count_by = summary.get("count_by")
    if isinstance(count_by, str) and not templating.is_template(count_by) and count_by.split(".")[0] not in fields:
        yield ("summary", "count_by"), unknown("output field", count_by, fields, "output fields")
    for index, column in enumerate(summary.get("report_columns") or []):
        if isinstance(column, str) and column.split(".")[0] not in fields:
            yield ("summary", "report_columns", index), unknown("output field", column, fields, "output fields")
