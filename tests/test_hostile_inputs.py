"""Hostile input, round 3 (issue 31: H4, H5, H9, H11, H14, H17, H19): each test reproduces
an attack that worked on main and checks it no longer does."""

from __future__ import annotations

import pytest

from runner.inputs import markdown_citations

# ---- H5: one line of thousands of citations parses in linear work -------------------------


def _characters_cleaned(monkeypatch: pytest.MonkeyPatch, text: str) -> int:
    cleaned = [0]
    clean = markdown_citations._clean

    def counting(span: str) -> str:
        cleaned[0] += len(span)
        return clean(span)

    monkeypatch.setattr(markdown_citations, "_clean", counting)
    markdown_citations.extract_citations(text)
    return cleaned[0]


def test_citations_on_one_line_without_a_sentence_end_cost_linear_work(monkeypatch):
    # On main each claim cleaned the whole line before it: 40,000 citations took 82 s.
    line = "See [a.txt:L1](a.txt) "
    small = _characters_cleaned(monkeypatch, line * 2_000)
    large = _characters_cleaned(monkeypatch, line * 4_000)
    assert large < 2.2 * small
    found = markdown_citations.extract_citations(line * 200)
    assert len(found) == 200 and found[-1]["claim"].endswith("See") and found[-1]["start"] == 1
    assert len(found[-1]["claim"]) <= markdown_citations.MAX_CLAIM_CHARS
