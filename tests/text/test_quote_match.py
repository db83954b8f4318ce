"""quote_match: right where naive fuzzy matching is wrong (cases in quote_cases.py)."""

from __future__ import annotations

import pytest

from helpers import run, write_json
from quote_cases import CASES, CON
from runner.engine.steps.read_lines import FileCache, read_lines
from runner.text.quotes import Source, match_quote, quote_match_function, source_from_read_lines


def test_the_case_set_covers_every_class_twice():
    kinds = {}
    for case in CASES:
        kinds[case.kind] = kinds.get(case.kind, 0) + 1
    assert len(CASES) >= 40 and min(kinds.values()) >= 2, kinds


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case):
    result = match_quote(case.quote, case.source, 0.8)
    assert result.passed is case.passes, result
    if case.flag:
        assert case.flag in result.flags, result
    if case.passes:
        assert result.status in ("EXACT", "MATCH") and result.score >= 0.8


def test_exact_status_and_matched_text_is_the_original_slice():
    result = match_quote("abridging the freedom of speech, or of the press", CON)
    assert result.status == "EXACT" and result.score == 1.0
    assert result.matched_text == "abridging the freedom of speech, or\nof the press"
    lines = CON.splitlines()
    first = next(n for n, line in enumerate(lines, 1) if "abridging the freedom of speech" in line)
    assert result.lines == [first, first + 1]


def test_fuzzy_match_status_and_score():
    result = match_quote("Ambition must be made to counteract ambitoin", CON + "\n" +
                         "Ambition must be made to counteract ambition.")
    assert result.status == "MATCH" and 0.8 <= result.score < 1.0


def test_not_found_and_partial_statuses():
    assert match_quote("Lawmakers cannot pass statutes about official churches", CON).status == "NOT_FOUND"
    partial = match_quote("the right of the people to keep and bear Arms, shall be infringed", CON)
    assert partial.status == "PARTIAL" and partial.score >= 0.9 and not partial.passed


def test_threshold_is_respected():
    quote = "If men were angles, no government would be neccessary"
    source = "If men were angels, no government would be necessary."
    assert match_quote(quote, source, 0.8).passed
    assert not match_quote(quote, source, 0.99).passed


def test_ambiguous_prefers_the_cited_lines(tmp_path):
    (tmp_path / "con.txt").write_text(CON)
    lines = CON.splitlines()
    start = next(n for n, line in enumerate(lines, 1) if line.startswith("Amendment IV.")) + 1
    read = read_lines(FileCache(), tmp_path, "con.txt", start, start + 1, 30)
    result = quote_match_function("the right of the people", read)
    assert "ambiguous" in result["flags"] and result["passed"]
    assert result["in_cited_range"] is True and result["lines"] == [start, start]


def test_search_in_and_line_numbers_from_read_lines(tmp_path):
    (tmp_path / "con.txt").write_text(CON)
    lines = CON.splitlines()
    at = next(n for n, line in enumerate(lines, 1) if "Excessive bail" in line)
    read = read_lines(FileCache(), tmp_path, "con.txt", at - 3, at - 2, 5)
    quote = "Excessive bail shall not be required"
    assert not quote_match_function(quote, read)["passed"]                     # only context_before + cited
    after = quote_match_function(quote, read, 0.8, ["context_before", "cited", "context_after"])
    assert after["passed"] and after["lines"] == [at, at] and after["in_cited_range"] is False
    source = source_from_read_lines(read, ["cited", "context_after"])
    assert match_quote(quote, source).lines == [at, at]


def test_line_tags_are_ignored():
    tagged = "[L10] Ambition must be made to\n[L11] counteract ambition."
    result = match_quote("Ambition must be made to counteract ambition.", Source([(tagged, 10)]))
    assert result.status == "EXACT" and result.lines == [10, 11]


def test_step_and_jinja_function_in_a_pipeline(project):
    (project.root / "data").mkdir()
    (project.root / "data" / "amendments.txt").write_text("AMENDMENTS\n\nAmendment I.\n" + CON.split("Amendment I.\n")[1])
    path = project.pipeline("""
        version: 1
        name: q
        params: {threshold: 0.8}
        steps:
          - id: source
            uses: read_lines
            with: {root: data, file: amendments.txt, start: "{{ item.start }}", end: "{{ item.end }}", context: 2}
          - id: match
            uses: quote_match
            with: {quote: "{{ item.quote }}", source: "{{ steps.source }}", threshold: "{{ params.threshold }}"}
          - id: raw
            uses: quote_match
            with: {quote: "{{ item.quote }}", text: "{{ steps.source.cited_text }}", first_line: "{{ item.start }}"}
        output:
          passed: "{{ steps.match.passed }}"
          status: "{{ steps.match.status }}"
          lines: "{{ steps.match.lines }}"
          raw_lines: "{{ steps.raw.lines }}"
          fn: "{{ quote_match(item.quote, steps.source.cited_text, 0.8).passed }}"
        """)
    items = write_json(project.root / "in.json", [
        {"quote": "Congress shall make no law respecting an establishment of religion", "start": 4, "end": 5},
        {"quote": "Congress shall make law respecting an establishment of religion", "start": 4, "end": 5}])
    good, bad = run(path, items).results
    assert (good["passed"], good["status"], good["lines"], good["raw_lines"], good["fn"]) == \
        (True, "EXACT", [4, 4], [4, 4], True)
    assert (bad["passed"], bad["status"], bad["fn"]) == (False, "PARTIAL", False)
