"""report.html in a real headless Chromium (Debian's chromium + chromium-driver): it loads
offline with no console error, the verdict filter and the search work, details open, the
page fits a 1400 px window; a screenshot is saved as a test artifact (path printed): in
$RUNNER_TEST_ARTIFACTS when set (CI sets it), else in the test's tmp_path."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers import BROWSER_TESTS, copy_example
from test_citation_judge import EXAMPLE, PIPELINE, jury_overrides, script

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
pytestmark = BROWSER_TESTS


def visible(driver) -> list[str]:
    return driver.execute_script(
        "return [].slice.call(document.querySelectorAll('tbody.item')).filter(function(t){return !t.hidden})"
        ".map(function(t){return t.querySelector('td').textContent.trim()})")


def test_report_page_in_chromium(browser, scripted_llm, cli, tmp_path, monkeypatch):
    work = tmp_path / "example"
    copy_example(EXAMPLE, work)
    monkeypatch.chdir(work)
    script(scripted_llm)
    result = cli("run", str(PIPELINE), "--input", "report.md", "--out", "out", "--cache-dir", str(tmp_path / "cache"),
                 "--quiet", "--set", "params.skip_jury_when_quote_not_found=false", *jury_overrides())
    assert result.exit_code == 0, result.output
    page = work / "out" / "report.html"
    assert "http://" not in page.read_text().split("<script>")[1] and "<link" not in page.read_text()   # offline

    browser.get(page.as_uri())
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []
    assert browser.find_element("id", "shown").text == "showing 13 of 13"
    assert browser.execute_script("return document.documentElement.scrollWidth") <= 1400

    browser.find_element("css selector", 'button.chip[data-verdict="QUOTE_NOT_FOUND"]').click()
    assert visible(browser) == ["8", "9", "10"]
    assert browser.find_element("id", "shown").text == "showing 3 of 13"
    browser.find_element("css selector", 'button.chip[data-verdict=""]').click()
    browser.find_element("id", "search").send_keys("magna")
    assert visible(browser) == ["12"]
    browser.find_element("id", "search").clear()
    browser.execute_script("document.getElementById('search').dispatchEvent(new Event('input'))")
    assert len(visible(browser)) == 13

    rows = browser.find_elements("css selector", "tbody.item")
    rows[3].find_element("css selector", "tr.row").click()                     # item 4: the hung jury
    detail = rows[3].find_element("css selector", "tr.detail")
    assert detail.is_displayed() and "resting on 2 valid vote(s)" in detail.text
    calls = detail.find_elements("css selector", "details.call")           # the jury's prompt once, each seat's call
    summaries = [call.find_element("css selector", "summary").text for call in calls]
    assert summaries == ["prompt", "call 4.1", "call 4.2", "call 4.3"]
    calls[1].find_element("css selector", "summary").click()
    assert calls[1].find_element("css selector", "pre").text.startswith("{")         # the seat's answer, opened
    assert not calls[2].find_element("css selector", "pre").is_displayed()          # the others stay folded
    assert "jury: VALID, overruled by the pipeline's rules" in rows[7].text       # QUOTE_NOT_FOUND over a VALID jury
    full = detail.find_element("css selector", "details.result")
    compact = full.find_element("css selector", "pre").get_attribute("textContent")
    assert "\n" not in compact                                  # written compact, indented when opened
    full.find_element("css selector", "summary").click()
    from selenium.webdriver.support.ui import WebDriverWait
    # the details' toggle event (which indents) fires after the click returns
    WebDriverWait(browser, 10).until(lambda _: full.find_element("css selector", "pre").get_attribute("data-indented"))
    shown = full.find_element("css selector", "pre").text
    assert shown.startswith('{\n  "index": 4,') and json.loads(shown) == json.loads(compact)

    artifacts = Path(os.environ.get("RUNNER_TEST_ARTIFACTS") or tmp_path)
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "report.png"
    browser.set_window_size(1400, 1800)
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    print(f"report screenshot: {shot}")
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def test_a_capped_report_opens_and_filters_in_chromium(browser, tmp_path):
    """3,000 results read from results.jsonl: the page lists 1,000 rows (every failing item
    first), its chips count all 3,000, and it says where the rest are (bench/report_browser.py
    does the same at 100,000 items and times it)."""
    from test_report import big_run

    from runner.outputs.report_html import render_html
    from runner.outputs.report_view import build_view

    summary, results, failing = big_run(tmp_path, 3000, failing_every=5)
    page = tmp_path / "report.html"
    page.write_text(render_html(build_view(summary, results, ["claim", "verdict"], passed=lambda r: r["ok"])))
    browser.get(page.as_uri())
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    assert browser.find_element("id", "shown").text == "showing 1000 of 1000 listed (3000 in the run)"
    assert "600 need review in all" in browser.find_element("id", "unlisted").text
    assert "results.jsonl" in browser.find_element("id", "unlisted").text
    chip = browser.find_element("css selector", 'button.chip[data-verdict="INVALID"]')
    assert chip.text == f"INVALID {failing}"
    chip.click()
    shown = visible(browser)
    assert len(shown) == failing == 600 and shown[:2] == ["5", "10"]
    assert browser.find_element("id", "shown").text == "showing 600 of 1000 listed (600 in the run)"
    browser.find_element("css selector", 'button.chip[data-verdict="VALID"]').click()
    assert browser.find_element("id", "shown").text == "showing 400 of 1000 listed (2400 in the run)"
    browser.find_element("css selector", 'button.chip[data-verdict=""]').click()
    browser.find_element("id", "search").send_keys("claim 2995")
    assert visible(browser) == ["2995"]
    assert browser.execute_script("return document.documentElement.scrollWidth") <= 1400
