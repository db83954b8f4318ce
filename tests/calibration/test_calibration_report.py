"""eval and sweep pages: the eval section inside report.html's container, sweep.html in the
same style, charts whose coinciding lines stay visible, values written for people."""

from __future__ import annotations

import re

from runner.calibration.eval_report import eval_markdown, markdown_to_html, sweep_html, sweep_markdown, with_section
from runner.outputs.report_html import STYLE, render_html
from runner.outputs.report_view import build_view


def sweep_report() -> dict:
    settings = []
    for cutoff in ("0.2", "0.5", "0.8"):
        for style in ("plain", "fancy"):
            settings.append({"set": {"params.cutoff": cutoff, "params.style": style}, "status": "cached",
                             "calls_needed": 0, "metric": 0.45499999999999996, "kappa": 0.45499999999999996,
                             "accuracy": 0.8333, "scored": 6, "counts": {"True": 4, "False": 2}})
    return {"name": "p", "pipeline": "pipelines/p.yaml", "input": "items.jsonl", "labels": "labels.jsonl",
            "metric": "kappa", "grid": {"params.cutoff": ["0.2", "0.5", "0.8"], "params.style": ["plain", "fancy"]},
            "settings": settings, "best": {"set": settings[0]["set"], "set_line": "--set params.cutoff=0.2",
                                           "metric": 0.45499999999999996, "accuracy": 0.8333}}


def test_the_eval_section_sits_inside_the_reports_container():
    page = render_html(build_view({"pipeline": "p", "total": 1, "errors": 0}, [{"index": 1, "v": "x"}]))
    once = with_section(page, "<h1>Evaluation</h1>")
    again = with_section(once, "<h1>Evaluation, again</h1>")
    assert again.count('<section id="eval">') == 1 and "Evaluation, again" in again
    assert again.index("<main>") < again.index('<section id="eval">') < again.index("</main>")


def test_sweep_page_has_the_reports_style_and_lines_that_stay_visible():
    page = sweep_html(sweep_report())
    assert STYLE in page and "<main>" in page and page.index("<table>") < page.index("</main>")
    lines = re.findall(r'<polyline [^>]*stroke-width="([\d.]+)"[^>]*stroke-dasharray="([^"]*)"', page)
    assert len(lines) == 2 + 3                                   # per chart: one line per setting of the other key
    for chart in (lines[:2], lines[2:]):                         # every series scores alike: they coincide
        assert len({dash for _, dash in chart}) == len(chart)                     # each its own dash pattern
        assert [float(w) for w, _ in chart] == sorted((float(w) for w, _ in chart), reverse=True)  # wider below
    text = sweep_markdown(sweep_report())
    assert "yes 4, no 2" in text and "True" not in text and "0.45499999999999996" not in text and "0.455" in text


def test_eval_tables_write_booleans_as_yes_and_no():
    report = {"labels": "l.jsonl", "key": "id", "truth": "label", "predicted": "verified", "kind": "numeric",
              "scored": 2, "label_rows": 2, "results": 2, "problems": {}, "metrics": {"n": 2, "mae": 0.1, "bias": True}}
    html = markdown_to_html(eval_markdown(report))
    assert "<td>yes</td>" in html and "True" not in html
