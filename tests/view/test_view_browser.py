"""The issue's done-when: two runs of the citation example, browsed and reviewed in headless
Chromium through a real `runner view`, exported as labels and scored by `runner eval`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from test_server import free_port, wait_until_up

from helpers import BROWSER_TESTS, copy_example
from test_citation_judge import EXAMPLE, PIPELINE, jury_overrides, script

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
pytestmark = BROWSER_TESTS


def killed_while_running(group):
    """A copy of the first run as a run killed with SIGKILL leaves it: run.json `running`, no summary."""
    shutil.copytree(group / "first", group / "killed")
    for name in ("summary.json", "report.md", "report.html"):
        (group / "killed" / name).unlink()
    manifest = json.loads((group / "killed" / "run.json").read_text())
    manifest.update(status="running", ended_at=None)
    (group / "killed" / "run.json").write_text(json.dumps(manifest))


def compare_first_and_second(browser):
    """Tick the two runs, compare: the page says what differs as `runner diff` does (issue 50, V4)."""
    for run in ("first", "second"):
        browser.find_element("css selector", f"input[value='citation_judge/{run}']").click()
    browser.find_element("id", "compare").click()
    # The click submits a form: Chromium may return before the compare page has loaded.
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait
    try:
        overview = WebDriverWait(browser, 10).until(lambda b: b.find_element("id", "overview")).text
    except TimeoutException:
        raise AssertionError(browser.find_element("tag name", "body").text) from None
    assert "params.quote_threshold: 0.8 -> 0.6" in overview and "counts by verdict:" in overview
    browser.back()


def looks_right(browser):
    """An item page as a user sees it (issue 50, V4 and the screenshot): the run's place under
    reports/ in the breadcrumbs, the verdict coloured by the pass rule, review buttons that
    are text and an icon (no emoji: a box without an emoji font)."""
    assert browser.find_element("css selector", "header .crumbs").text == "reports/citation_judge/second / item 1"
    badge = browser.find_element("id", "verdict")
    assert badge.text == "VALID" and badge.value_of_css_property("background-color") == "rgba(26, 127, 55, 1)"
    for button, word in (("up", "right"), ("down", "wrong")):
        element = browser.find_element("id", button)
        assert element.text == word and element.find_elements("css selector", "svg path")
        assert element.find_element("css selector", "svg").size["width"] > 0
    body = browser.find_element("tag name", "body").text
    assert not any(0x1F300 <= ord(char) <= 0x1FAFF for char in body)


def test_review_five_items_in_chromium_then_export_and_eval(browser, scripted_llm, cli, tmp_path, monkeypatch):
    from selenium.webdriver.support.ui import WebDriverWait
    work = tmp_path / "example"
    copy_example(EXAMPLE, work)
    monkeypatch.chdir(work)
    script(scripted_llm)
    for out, threshold in (("reports/citation_judge/first", "0.8"), ("reports/citation_judge/second", "0.6")):
        done = cli("run", str(PIPELINE), "--input", "report.md", "--out", out, "--cache-dir", str(tmp_path / "cache"),
                   "--quiet", "--set", f"params.quote_threshold={threshold}", *jury_overrides())
        assert done.exit_code == 0, done.output
        if threshold == "0.8":      # run.json's started_at is to the second: the second run starts after the first
            time.sleep(1.1)
    killed_while_running(work / "reports" / "citation_judge")
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "runner.cli.app", "view", "reports", "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_up(port, server)
        base = f"http://127.0.0.1:{port}"
        browser.get(base + "/")
        killed = browser.find_element("css selector", "tr[data-run='citation_judge/killed']")
        assert "interrupted" in killed.text                  # listed, and said to be interrupted (issue 50, V4)
        compare_first_and_second(browser)
        links = [a.get_attribute("href") for a in browser.find_elements("css selector", "a")
                 if "/run/citation_judge/" in (a.get_attribute("href") or "")]
        assert links and links[0].endswith("/run/citation_judge/second")          # newest first
        browser.get(base + "/run/citation_judge/second")
        rows = browser.find_elements("css selector", "tr[data-index]")
        assert len(rows) == 13
        browser.get(base + "/run/citation_judge/second?verdict=VALID")
        valid = [r.get_attribute("data-index") for r in browser.find_elements("css selector", "tr[data-index]")]
        assert 0 < len(valid) < 13
        for number, agrees, correct in ((1, True, None), (2, False, "INVALID"), (3, True, None), (4, False, "VALID"),
                                        (5, True, None)):
            browser.get(f"{base}/run/citation_judge/second/item/{number}")
            if number == 1:
                looks_right(browser)
                page = browser.find_element("tag name", "body").text
                assert "Quote against its source" in page and browser.find_element("id", "source").text
                votes = browser.find_elements("css selector", "div.panel table tbody tr")
                assert len(votes) >= 3                                   # each juror's vote
                assert browser.find_elements("css selector", "div.panel[id^='call-'] pre")   # prompts and answers
            browser.find_element("id", "up" if agrees else "down").click()
            if correct:
                browser.find_element("id", "correct").send_keys(correct)
            browser.find_element("id", "save").click()
            WebDriverWait(browser, 10).until(
                lambda b: b.find_element("id", "review-status").get_attribute("data-saved") == "yes")
            assert browser.find_element("id", "review-status").text.startswith("saved")
        if os.environ.get("RUNNER_VIEW_SCREENSHOT"):                  # how README's docs/view.png is made
            browser.set_window_size(1100, 760)
            browser.get(f"{base}/run/citation_judge/second/item/2")
            browser.save_screenshot(os.environ["RUNNER_VIEW_SCREENSHOT"])
    finally:
        server.terminate()
        server.wait(timeout=10)
    exported = cli("labels", "export", "reports", "--pipeline", "citation_judge", "--out", "labels.jsonl")
    assert exported.exit_code == 0, exported.output
    assert len((work / "labels.jsonl").read_text().splitlines()) == 5
    scored = cli("eval", "reports/citation_judge/second", "--labels", "labels.jsonl", "--key", "item_key",
                 "--truth", "label")
    assert scored.exit_code == 0, scored.output
    report = json.loads((work / "reports" / "citation_judge" / "second" / "eval.json").read_text())
    assert report["scored"] == 5
