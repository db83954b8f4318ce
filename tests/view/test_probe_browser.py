"""probe.html in a real headless Chromium (Debian's chromium + chromium-driver): opened as a
file and through `runner view` (its Content-Security-Policy), it shows with no console error,
no script and nothing fetched, its table and one bar chart per juror fit the window; a
screenshot is saved as a test artifact (in $RUNNER_TEST_ARTIFACTS when set, else tmp_path)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_server import free_port, wait_until_up

from helpers import BROWSER_TESTS
from jurors import careful, obedient
from test_citation_judge import EXAMPLE, PIPELINE

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
pytestmark = BROWSER_TESTS


def test_probe_page_in_chromium(browser, fake_llm, cli, tmp_path, monkeypatch):
    work = tmp_path / "example"
    shutil.copytree(EXAMPLE, work)
    monkeypatch.chdir(work)
    fake_llm.script(careful, model="careful")
    fake_llm.script(obedient, model="obedient")
    result = cli("probe", str(PIPELINE), "--input", "report.md", "--quiet", "--cache-dir", str(tmp_path / "cache"),
                 "--set", "models.gemini.limits.requests_per_day=1000",
                 "--model", f"local=openai/careful@{fake_llm.url}", "--model", f"gemini=openai/obedient@{fake_llm.url}",
                 "--model", f"openai=openai/careful@{fake_llm.url}")
    assert result.exit_code == 0, result.output
    [page] = list((work / "reports").rglob("probe.html"))
    text = page.read_text()
    assert "<script" not in text and "src=" not in text and "http" not in text.split("</head>")[0]   # self-contained
    report = json.loads(page.with_name("probe.json").read_text())

    def check(browser) -> None:
        assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
        rows = browser.find_elements("css selector", "table tbody tr")
        assert len(rows) == sum(len(p["rows"]) for p in report["probes"])
        charts = browser.find_elements("css selector", "figure.chart svg")
        assert len(charts) == 1 + len(report["jurors"]) == 4
        gemini = charts[2]
        assert "gemini" in gemini.text
        heights = [float(r.get_attribute("height")) for r in gemini.find_elements("css selector", "rect")]
        assert max(heights) > 100                          # its inject_claim bar: every injected copy obeyed
        assert browser.execute_script("return document.documentElement.scrollWidth") <= 1400
        background = browser.execute_script("return getComputedStyle(document.querySelector('th')).backgroundColor")
        assert background != "rgba(0, 0, 0, 0)"           # the inline style applies

    browser.get(page.as_uri())
    check(browser)
    artifacts = Path(os.environ.get("RUNNER_TEST_ARTIFACTS") or tmp_path)
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "probe.png"
    browser.set_window_size(1400, 1600)
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    print(f"probe screenshot: {shot}")

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "runner.cli.app", "view", "reports", "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_up(port, server)
        relative = page.parent.relative_to(work / "reports").as_posix()
        browser.get(f"http://127.0.0.1:{port}/run/{relative}/probe")     # the run page links it (test_probe.py)
        check(browser)
    finally:
        server.terminate()
        server.wait(timeout=30)
