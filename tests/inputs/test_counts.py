"""A run counts its input before it starts (run.json, progress, "N of M item(s)"): the
adapters that can count without building records must count exactly what they yield."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.api import ItemSource, load_items
from runner.inputs import iter_records, record_counter
from runner.pipeline.loader import load_pipeline

REPO = Path(__file__).resolve().parents[2]

REPORT = """# A report

The Constitution begins "We the People" [us_constitution.txt:L1-L2](data/us_constitution.txt). Then
[a.txt:L3](a.txt) cites, and e.g. this one [b.txt:L4-L9](b.txt)! A broken one [f:L-3](x), [:L1](x),
one with a tab in its name [c\td.txt:L1](c.txt), and one that is not a citation [see](x).

- a list item [list.txt:L10](list.txt)
> a quote [quote.txt:L2-L3](quote.txt)

[last.txt:L99](last.txt)"""


def records(adapter: str, path: Path, options: dict | None = None) -> int:
    return sum(1 for _ in iter_records(adapter, path, options or {}))


@pytest.mark.parametrize("options", [{}, {"pattern": r"\[(?P<file>[^\]:]+):L(?P<start>\d+)\]\((?P<target>[^)]*)\)"}])
def test_citations_are_counted_as_read(tmp_path, options):
    report = tmp_path / "report.md"
    report.write_text(REPORT, encoding="utf-8")
    count = record_counter("markdown_citations")
    assert count is not None
    assert count(report, options) == records("markdown_citations", report, options) > 0
    example = REPO / "examples" / "citation_judge" / "report.md"
    assert count(example, {}) == records("markdown_citations", example) == 13


def test_json_lines_are_counted_as_read(tmp_path):
    lines = tmp_path / "items.jsonl"
    # A BOM, blank and whitespace-only lines (ASCII, NBSP, a separator control), a line that
    # is not UTF-8, one that is not JSON, CRLF and a last line without its newline.
    lines.write_bytes(b'\xef\xbb\xbf{"a": 1}\n\n   \n{"b": 2}\r\nnot json\n\xff\xfe\n\xc2\xa0\n\x1c\n\xef\xbb\xbf\n{"c": 3}')
    count = record_counter("jsonl")
    assert count is not None
    assert count(lines, {}) == records("jsonl", lines) == 5


def test_adapters_without_a_counter_are_counted_by_a_pass(tmp_path):
    assert record_counter("json") is None
    data = tmp_path / "items.json"
    data.write_text('[{"a": 1}, {"a": 2}]', encoding="utf-8")
    assert records("json", data) == 2


def test_a_run_counts_exploded_records_by_their_items(project):
    path = project.pipeline("""
        version: 1
        name: t
        input: {adapter: jsonl, explode: parts}
        steps: [{id: s, uses: compute, with: {v: "{{ item }}"}}]
        output: {v: "{{ steps.s.v }}"}
        """)
    (project.root / "in.jsonl").write_text('{"parts": [1, 2, 3]}\n{"parts": [4]}\n', encoding="utf-8")
    source = ItemSource(input_path=project.root / "in.jsonl")
    items = load_items(load_pipeline(path), source)
    assert source.input_items == len(items) == len(list(items)) == 4
