"""Exports for CI, chosen with `runner run --format`: results.csv and junit.xml."""

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

FORMATS = ("csv", "junit")


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


def results_csv(results: list[dict[str, Any]]) -> str:
    rows = [flatten({k: v for k, v in r.items() if k != "item_key"}) for r in results]
    columns: dict[str, None] = {"index": None}
    for row in rows:
        columns.update(dict.fromkeys(row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def junit_xml(pipeline: str, results: list[dict[str, Any]], passed: Callable[[dict[str, Any]], bool],
              rule: str, verdict_field: str | None, label: Callable[[dict[str, Any]], str]) -> str:
    """One testcase per item: <error> when the item errored, <failure> when it fails the
    pipeline's pass rule (`summary.pass_when`, else its first summary rate), else passed.
    The error is the item's message (`error_message` where `error` is a mere true)."""
    suite = ET.Element("testsuite", name=pipeline, tests=str(len(results)))
    failures = errors = 0
    for result in results:
        case = ET.SubElement(suite, "testcase", classname=pipeline, name=label(result))
        verdict = result.get(verdict_field) if verdict_field else None
        if result.get("error"):
            errors += 1
            error = error_of(result)
            detail = result["error"] if isinstance(result["error"], str) else error
            ET.SubElement(case, "error", message=error[:500]).text = detail
        elif not passed(result):
            failures += 1
            message = f"{verdict_field}={verdict}: fails {rule}" if verdict_field else f"fails {rule}"
            ET.SubElement(case, "failure", message=message).text = json.dumps(result, ensure_ascii=False,
                                                                                default=str, indent=2)
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suites = ET.Element("testsuites", name=pipeline, tests=str(len(results)), failures=str(failures),
                        errors=str(errors))
    suites.append(suite)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def write_exports(out: Path, formats: list[str], pipeline: str, results: list[dict[str, Any]],
                  passed: Callable[[dict[str, Any]], bool], rule: str, verdict_field: str | None,
                  label: Callable[[dict[str, Any]], str]) -> None:
    if "csv" in formats:
        atomic_write(out / "results.csv", results_csv(results))
    if "junit" in formats:
        atomic_write(out / "junit.xml", junit_xml(pipeline, results, passed, rule, verdict_field, label))
