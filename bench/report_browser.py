"""Reports at any size: build report.md and report.html from a results.jsonl of 10,000 and
100,000 citation-judge-shaped results (3 jurors each, read by a re-iterable reader, as the
streaming engine hands them over), then open report.html in headless Chromium (Debian's
chromium + chromium-driver, through selenium as tests/outputs/test_report_browser.py does).

Records per size: the files' sizes, the time and the peak of Python allocations
(tracemalloc) to build both reports, and the page's load time in Chromium (best of 3:
driver.get wall time, and navigation start to the load event). Prints the table recorded
in bench/RESULTS.md.

    python bench/report_browser.py [--sizes 10000,100000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from runner.outputs.report_html import render_html  # noqa: E402
from runner.outputs.report_md import render_report  # noqa: E402
from runner.outputs.report_view import build_view  # noqa: E402

COLUMNS = ["citation.file", "citation.start", "citation.end", "citation.claim", "citation.quote", "verdict",
           "quote_score", "step_3_semantic.reason", "error"]
VERDICTS = ["VALID"] * 6 + ["INVALID", "QUOTE_NOT_FOUND", "HUNG_JURY", "UNSUPPORTED"]


class ResultsFile:
    """results.jsonl read line by line, again on every iteration."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __iter__(self) -> Iterator[dict[str, Any]]:
        with self.path.open(encoding="utf-8") as lines:
            for line in lines:
                yield json.loads(line)


def result(index: int) -> dict[str, Any]:
    verdict = VERDICTS[index * 7 % len(VERDICTS)]
    claim = f"Claim {index}: the record shows that the committee met on day {index % 28 + 1} and approved the budget"
    votes = [{"model": model, "value": verdict, "cached": True, "latency_ms": 0, "error": None,
              "answer": {"verdict": verdict, "reason": f"{model} read lines {index}-{index + 2} and found the quote",
                         "substantive_quote": True, "quote_in_context": True, "supports_claim": verdict == "VALID"}}
             for model in ("local", "gemini", "openai")]
    return {"index": index, "step_1_existence": True, "step_2_quote_match": verdict != "QUOTE_NOT_FOUND",
            "quote_score": 0.9 + (index % 10) / 100,
            "step_3_semantic": {"verdict": verdict, "reason": f"Consensus (3/3): {verdict}", "valid_votes": 3,
                                "votes": votes},
            "verdict": verdict, "verified": verdict == "VALID",
            "text_found": f"[L{index}] the committee met and approved the budget for the year",
            "quote_flags": [], "citation": {"index": index, "file": f"minutes_{index % 50}.txt", "start": index,
                                            "end": index + 2, "claim": claim, "quote": "approved the budget"}}


def write_run(folder: Path, n: int) -> tuple[dict[str, Any], ResultsFile]:
    counts: Counter[str] = Counter()
    with (folder / "results.jsonl").open("w", encoding="utf-8") as out:
        for index in range(1, n + 1):
            item = result(index)
            counts[item["verdict"]] += 1
            out.write(json.dumps(item) + "\n")
    summary = {"pipeline": "citation_judge", "total": n, "errors": 0, "count_by": "verdict", "counts": dict(counts),
               "verification_rate": round(counts["VALID"] / n, 4), "verification_rate_count": counts["VALID"]}
    return summary, ResultsFile(folder / "results.jsonl")


def write_reports(folder: Path, summary: dict[str, Any], results: ResultsFile) -> None:
    view = build_view(summary, results, COLUMNS, passed=lambda r: r["verified"])
    (folder / "report.md").write_text(render_report(view), encoding="utf-8")
    (folder / "report.html").write_text(render_html(view), encoding="utf-8")


def build(folder: Path, summary: dict[str, Any], results: ResultsFile) -> tuple[float, int]:
    """Seconds to build both reports, then (a second build, traced) the peak of Python allocations."""
    started = time.perf_counter()
    write_reports(folder, summary, results)
    seconds = time.perf_counter() - started
    tracemalloc.start()
    write_reports(folder, summary, results)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return seconds, peak


def browser(profile: Path) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))


def open_page(driver: Any, page: Path) -> tuple[float, float, str]:
    driver.get("about:blank")
    started = time.perf_counter()
    driver.get(page.as_uri())                          # returns once the load event has fired
    wall = time.perf_counter() - started
    load_ms = driver.execute_script("var t=performance.timing; return t.loadEventEnd-t.navigationStart")
    shown = driver.find_element("id", "shown").text
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    if errors:
        raise SystemExit(f"console errors: {errors}")
    return wall, load_ms / 1000, shown


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        driver = browser(Path(tmp) / "profile")
        try:
            for n in sizes:
                folder = Path(tmp) / str(n)
                folder.mkdir()
                summary, results = write_run(folder, n)
                seconds, peak = build(folder, summary, results)
                loads = [open_page(driver, folder / "report.html") for _ in range(3)]
                wall, load, shown = min(loads)
                rows.append((n, (folder / "results.jsonl").stat().st_size, (folder / "report.md").stat().st_size,
                             (folder / "report.html").stat().st_size, seconds, peak, wall, load, shown))
        finally:
            driver.quit()
    print("| items | results.jsonl | report.md | report.html | build both | peak Python allocations "
          "| Chromium load (wall, best of 3) | navigation to load event | page says |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, jsonl, md, page, seconds, peak, wall, load, shown in rows:
        print(f"| {n:,} | {jsonl / 1e6:.1f} MB | {md / 1e3:.0f} KB | {page / 1e6:.2f} MB | {seconds:.1f} s "
              f"| {peak / 1e6:.1f} MB | {wall:.2f} s | {load:.2f} s | {shown} |")


if __name__ == "__main__":
    main()
