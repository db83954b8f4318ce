"""--format csv|junit and --fail-under."""

from __future__ import annotations

import csv
import xml.etree.ElementTree as ET
from pathlib import Path

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
    assert "pass_rate 0.5 (1/2) is below --fail-under 0.8 (rates run 0-1)" in low.stderr
    ok = cli("run", str(path), "--input", str(source), "--quiet", "--fail-under", "0.5")
    assert ok.exit_code == 0 and "pass_rate 0.5 (1/2) meets --fail-under 0.5" in ok.stderr
    percent = cli("run", str(path), "--input", str(source), "--fail-under", "80")
    assert percent.exit_code == 2 and "--fail-under" in percent.stderr and "0.0<=x<=1.0" in percent.stderr
    help_text = " ".join(cli("run", "--help").stdout.replace("│", " ").split())
    assert "Rates run from 0 to 1" in help_text


SLIDES = """
    version: 1
    name: slides
    steps: [{id: s, uses: compute, with: {failed: "{{ item.rating == 'broken' }}"}}]
    output:
      slide_index: "{{ item.slide }}"
      rating: "{{ none if steps.s.failed else item.rating }}"
      score: "{{ item.score }}"
      note: "{{ item.note }}"
      error: "{{ steps.s.failed }}"
      error_message: "{{ 'judge unreachable' if steps.s.failed else none }}"
    summary:
      count_by: rating
      pass_when: "result.rating != 'red'"
      reason_field: note
      report_columns: [slide_index, rating, score, note, error_message]
    """
DECK = [{"slide": 0, "rating": "green", "score": 90, "note": "figures match"},
        {"slide": 1, "rating": "red", "score": 25, "note": "growth is 11.7%, not 50%"},
        {"slide": 2, "rating": "amber", "score": 65, "note": "rounded"},
        {"slide": 3, "rating": "broken", "score": 0, "note": ""}]


def test_a_pipelines_declared_fields_drive_junit_and_the_reports(project, cli):
    path = project.pipeline(SLIDES)
    source = write_json(project.root / "deck.json", DECK)
    result = cli("run", str(path), "--input", str(source), "--out", "out", "--format", "junit")
    assert result.exit_code == 0, result.stderr
    suite = ET.parse(project.root / "out" / "junit.xml").getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "1", "1")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["item 1 (slide_index 0, rating green, score 90)",
                                              "item 2 (slide_index 1, rating red, score 25)",
                                              "item 3 (slide_index 2, rating amber, score 65)",
                                              "item 4 (slide_index 3, score 0)"]
    assert cases[1].find("failure").get("message") == "rating=red: fails pass_when (result.rating != 'red')"
    assert cases[2].find("failure") is None                           # amber passes: only red fails
    assert cases[3].find("error").get("message") == "judge unreachable"       # the message, not "True"

    page = (project.root / "out" / "report.html").read_text()
    assert "<th>rating</th><th>note</th>" in page                    # the verdict and reason columns
    assert 'placeholder="search slide_index, score, note…"' in page and "claims" not in page
    assert '<span class="badge fail">red</span>' in page and '<span class="badge pass">amber</span>' in page
    assert "growth is 11.7%, not 50%" in page.split('<tbody class="item" data-verdict="red"')[1].split("</tr>")[0]
    assert '<span class="badge">-</span>' not in page and ">True<" not in page
    text = (project.root / "out" / "report.md").read_text()
    assert "### Item 4: ERROR" in text and "- **error:** judge unreachable" in text


def passes(name: str, result: dict) -> bool:
    from runner.engine.rates import PassRule
    from runner.pipeline.loader import load_pipeline
    from runner.templating.sandbox import Renderer
    pipeline = load_pipeline(Path(__file__).resolve().parents[2] / "pipelines" / f"{name}.yaml")
    rule = PassRule.of(pipeline.summary)
    assert rule is not None and rule.name == "pass_when"
    return bool(Renderer(pipeline.prompts_dir).condition(rule.expression, {"params": pipeline.params, "result": result}))


def test_shipped_pipelines_declare_what_passes():
    assert [passes("slide_judge", {"rating": r}) for r in ("green", "amber", "unknown", "red")] == [
        True, True, True, False]
    fine = {"blocked": False, "hallucination": False, "judge_error": False}
    assert passes("evidence_judge", fine)
    assert not any(passes("evidence_judge", {**fine, flag: True}) for flag in fine)


def test_validate_checks_the_pass_rule(project, cli):
    broken = SLIDES.replace("pass_when: \"result.rating != 'red'\"", "pass_when: \"reslt.rating != 'red'\"")
    result = cli("validate", str(project.pipeline(broken)))
    assert result.exit_code == 2 and "summary.pass_when" in result.output and "reslt" in result.output
