"""--format csv|junit and --fail-under."""

from __future__ import annotations

import csv
import xml.etree.ElementTree as ET

from helpers import write_json

PIPELINE = """
    version: 1
    name: ex
    steps: [{id: s, uses: compute, with: {r: "{{ 1 / item.d }}"}}]
    output:
      verdict: "{{ 'PASS' if steps.s.r > 0.4 else 'FAIL' }}"
      detail: "{{ {'d': item.d, 'tags': ['a', 'b']} }}"
    summary:
      count_by: verdict
      rates: {pass_rate: "result.verdict == 'PASS'"}
    """


def test_csv_and_junit_beside_the_default_files(project, cli):
    path = project.pipeline(PIPELINE)
    source = write_json(project.root / "in.json", [{"d": 2}, {"d": 4}, {"d": 0}])
    result = cli("run", str(path), "--input", str(source), "--out", "out", "--format", "csv", "--format", "junit")
    assert result.exit_code == 0, result.stderr
    rows = list(csv.DictReader((project.root / "out" / "results.csv").open(encoding="utf-8")))
    assert list(rows[0]) == ["index", "verdict", "detail.d", "detail.tags", "error"]
    assert rows[0]["detail.d"] == "2" and rows[0]["detail.tags"] == '["a", "b"]'
    assert rows[2]["error"].startswith("step 's'") and rows[2]["verdict"] == ""
    suite = ET.parse(project.root / "out" / "junit.xml").getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["item 1", "item 2", "item 3"]
    assert cases[0].find("failure") is None and cases[0].find("error") is None
    assert cases[1].find("failure").get("message") == "verdict=FAIL: fails pass_rate (result.verdict == 'PASS')"
    assert "ZeroDivisionError" in cases[2].find("error").get("message")


def test_unknown_format_is_a_usage_error(project, cli):
    path = project.pipeline(PIPELINE)
    result = cli("run", str(path), "--record", "d=2", "--format", "xlsx")
    assert result.exit_code == 2 and result.stderr.strip() == "--format xlsx: choose from csv, junit"


def test_fail_under_names_its_rate_and_its_range(project, cli):
    path = project.pipeline(PIPELINE)
    source = write_json(project.root / "in.json", [{"d": 2}, {"d": 4}])
    low = cli("run", str(path), "--input", str(source), "--quiet", "--fail-under", "0.8")
    assert low.exit_code == 1
    assert "pass_rate 0.5 is below --fail-under 0.8 (rates run 0-1)" in low.stderr
    ok = cli("run", str(path), "--input", str(source), "--quiet", "--fail-under", "0.5")
    assert ok.exit_code == 0 and "pass_rate 0.5 meets --fail-under 0.5" in ok.stderr
    percent = cli("run", str(path), "--input", str(source), "--fail-under", "80")
    assert percent.exit_code == 2 and "--fail-under" in percent.stderr and "0.0<=x<=1.0" in percent.stderr
    help_text = " ".join(cli("run", "--help").stdout.replace("│", " ").split())
    assert "Rates run from 0 to 1" in help_text
