"""Exports for CI, chosen with `runner run --format`: results.csv and junit.xml.

A CSV cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return is a formula to
a spreadsheet: such text cells get a leading `'` (OWASP's CSV injection advice) unless
the run asks for raw cells (`--csv-raw`). junit.xml holds only characters XML 1.0 allows."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runner.outputs.files import atomic_write
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


def results_csv(results: list[dict[str, Any]], raw: bool = False) -> str:
    rows = [flatten(r) for r in results]
    columns: dict[str, None] = {"index": None}
    for row in rows:
        columns.update(dict.fromkeys(row))
    buffer = io.StringIO()
    # RFC 4180 line ends: the writer then quotes every cell holding a CR or an LF, which
    # with "\n" alone it would leave bare a CR that readers take for a line break.
    writer = csv.writer(buffer, lineterminator="\r\n")
    cell = (lambda value: value) if raw else neutralised
    writer.writerow([cell(name) for name in columns])
    writer.writerows([cell(row.get(name, "")) for name in columns] for row in rows)
    return buffer.getvalue()


def junit_xml(pipeline: str, results: list[dict[str, Any]], passed: Callable[[dict[str, Any]], bool],
              rule: str, verdict_field: str | None, label: Callable[[dict[str, Any]], str]) -> str:
    """One testcase per item: <error> when the item errored, <failure> when it fails the
    pipeline's pass rule (`summary.pass_when`, else its first summary rate), else passed.
    The error is the item's message (`error_message` where `error` is a mere true)."""
    pipeline = xml_text(pipeline)
    suite = ET.Element("testsuite", name=pipeline, tests=str(len(results)))
    failures = errors = 0
    for result in results:
        case = ET.SubElement(suite, "testcase", classname=pipeline, name=xml_text(label(result)))
        verdict = result.get(verdict_field) if verdict_field else None
        if result.get("error"):
            errors += 1
            error = xml_text(error_of(result))
            detail = xml_text(result["error"]) if isinstance(result["error"], str) else error
            ET.SubElement(case, "error", message=error[:500]).text = detail
        elif not passed(result):
            failures += 1
            message = f"{verdict_field}={verdict}: fails {rule}" if verdict_field else f"fails {rule}"
            ET.SubElement(case, "failure", message=xml_text(message)).text = xml_text(
                json.dumps(result, ensure_ascii=False, default=str, indent=2))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suites = ET.Element("testsuites", name=pipeline, tests=str(len(results)), failures=str(failures),
                        errors=str(errors))
    suites.append(suite)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def write_exports(out: Path, formats: list[str], pipeline: str, results: list[dict[str, Any]],
                  passed: Callable[[dict[str, Any]], bool], rule: str, verdict_field: str | None,
                  label: Callable[[dict[str, Any]], str], csv_raw: bool = False) -> None:
    if "csv" in formats:
        atomic_write(out / "results.csv", results_csv(results, raw=csv_raw))
    if "junit" in formats:
        atomic_write(out / "junit.xml", junit_xml(pipeline, results, passed, rule, verdict_field, label))
