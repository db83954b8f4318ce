"""Exports for CI, chosen with `runner run --format`: results.csv and junit.xml, each written
a row (a test case) at a time from the results file: a run of any size, never whole in memory.

A CSV cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return is a formula to
a spreadsheet: such text cells get a leading `'` (OWASP's CSV injection advice) unless
the run asks for raw cells (`--csv-raw`). junit.xml holds only characters XML 1.0 allows."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from runner.fileio import atomic_write_lines
from runner.outputs.report_view import error_of
from runner.safetext import xml_text

FORMATS = ("csv", "junit")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralised(cell: Any) -> Any:
    """A text cell a spreadsheet would run as a formula, prefixed with `'`; numbers stay numbers."""
    return f"'{cell}" if isinstance(cell, str) and cell.startswith(FORMULA_START) else cell


def flatten(result: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested objects become dotted columns (`citation.file`); lists stay one JSON cell."""
    flat: dict[str, Any] = {}
    for key, value in result.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{name}."))
        elif isinstance(value, (dict, list)):
            flat[name] = json.dumps(value, ensure_ascii=False, default=str) if value else ""
        else:
            flat[name] = "" if value is None else value
    return flat


def csv_chunks(results: Iterable[dict[str, Any]], raw: bool = False) -> Iterator[str]:
    """results.csv a row at a time: one pass over `results` (re-iterable) for the columns, one for the rows."""
    columns: dict[str, None] = {"index": None}
    for result in results:
        columns.update(dict.fromkeys(flatten(result)))
    columns.pop("item_key", None)       # runner's own, for reviews: not exported
    buffer = io.StringIO()
    # RFC 4180 line ends: the writer then quotes every cell holding a CR or an LF, which
    # with "\n" alone it would leave bare a CR that readers take for a line break.
    writer = csv.writer(buffer, lineterminator="\r\n")
    cell = (lambda value: value) if raw else neutralised
    writer.writerow([cell(name) for name in columns])
    for result in results:
        row = flatten(result)
        writer.writerow([cell(row.get(name, "")) for name in columns])
        if buffer.tell() > 1 << 16:
            yield _drain(buffer)
    yield _drain(buffer)


def _drain(buffer: io.StringIO) -> str:
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return text


def junit_chunks(pipeline: str, results: Iterable[dict[str, Any]], passed: Callable[[dict[str, Any]], bool],
                 rule: str, verdict_field: str | None, label: Callable[[dict[str, Any]], str]) -> Iterator[str]:
    """One testcase per item: <error> when the item errored, <failure> when it fails the
    pipeline's pass rule (`summary.pass_when`, else its first summary rate), else passed.
    The error is the item's message (`error_message` where `error` is a mere true). Written
    a case at a time (the counts in the opening tags come from a first pass over `results`)."""
    pipeline = xml_text(pipeline)
    outcomes = Counter("error" if result.get("error") else "passed" if passed(result) else "failure"
                       for result in results)
    counts = {"tests": str(outcomes.total()), "failures": str(outcomes["failure"]), "errors": str(outcomes["error"])}
    suites, suite = (_opening(tag, {"name": pipeline, **counts}) for tag in ("testsuites", "testsuite"))
    yield "<?xml version='1.0' encoding='utf-8'?>\n"
    if not outcomes:
        yield f"{suites}\n  {suite[:-1]} />\n</testsuites>\n"
        return
    yield f"{suites}\n  {suite}"
    for result in results:
        case = ET.Element("testcase", classname=pipeline, name=xml_text(label(result)))
        if result.get("error"):
            error = xml_text(error_of(result))
            detail = xml_text(result["error"]) if isinstance(result["error"], str) else error
            ET.SubElement(case, "error", message=error[:500]).text = detail
        elif not passed(result):
            message = f"{verdict_field}={result.get(verdict_field)}: fails {rule}" if verdict_field else f"fails {rule}"
            ET.SubElement(case, "failure", message=xml_text(message)).text = xml_text(
                json.dumps(result, ensure_ascii=False, default=str, indent=2))
        ET.indent(case, space="  ", level=2)
        yield "\n    " + ET.tostring(case, encoding="unicode")
    yield "\n  </testsuite>\n</testsuites>\n"


def _opening(tag: str, attributes: dict[str, str]) -> str:
    """`<tag a="...">`, escaped as ElementTree escapes it."""
    element = ET.Element(tag, attributes)
    element.text = "-"
    return ET.tostring(element, encoding="unicode").rsplit("-</", 1)[0]


def write_exports(out: Path, formats: list[str], pipeline: str, results: Iterable[dict[str, Any]],
                  passed: Callable[[dict[str, Any]], bool], rule: str, verdict_field: str | None,
                  label: Callable[[dict[str, Any]], str], csv_raw: bool = False) -> None:
    """results.csv and junit.xml streamed from `results` (re-iterable: a view over results.jsonl)."""
    if "csv" in formats:
        atomic_write_lines(out / "results.csv", csv_chunks(results, csv_raw))
    if "junit" in formats:
        atomic_write_lines(out / "junit.xml", junit_chunks(pipeline, results, passed, rule, verdict_field, label))
