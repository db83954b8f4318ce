"""The `sentences` filter: abbreviations, initials, decimals, ellipses and quotes."""

from __future__ import annotations

import pytest

from runner.templating.sandbox import Renderer
from runner.text.sentences import split_sentences


@pytest.mark.parametrize("text,sentences", [
    ("The U.S. economy grew 2.5% in Q3. Prices rose.", ["The U.S. economy grew 2.5% in Q3.", "Prices rose."]),
    ("Dr. Smith arrived. He sat down.", ["Dr. Smith arrived.", "He sat down."]),
    ("Use a filter, e.g. Jinja's own. It works.", ["Use a filter, e.g. Jinja's own.", "It works."]),
    ("Compare them, i.e. Mr. Jones and Prof. Lee. Done.", ["Compare them, i.e. Mr. Jones and Prof. Lee.", "Done."]),
    ("It costs $3.50 or 3.5 euros. That is cheap.", ["It costs $3.50 or 3.5 euros.", "That is cheap."]),
    ("Wait... What happened? Nothing!", ["Wait...", "What happened?", "Nothing!"]),
    ("The end\u2026 Next one.", ["The end\u2026", "Next one."]),
    ("It trailed off... and went on.", ["It trailed off... and went on."]),
    ('She said "It is done." Then she left.', ['She said "It is done."', "Then she left."]),
    ("She said \u201cIt is done.\u201d Then she left.", ["She said \u201cIt is done.\u201d", "Then she left."]),
    ('"Is it?" he asked. "Yes."', ['"Is it?" he asked.', '"Yes."']),
    ("(It worked.) Then it broke.", ["(It worked.)", "Then it broke."]),
    ("He moved to the U.S. He liked it.", ["He moved to the U.S.", "He liked it."]),
    ("The U.S. Senate voted. J. R. Smith agreed.", ["The U.S. Senate voted.", "J. R. Smith agreed."]),
    ("See Fig. 2 and No. 5 for details. 3 firms failed.", ["See Fig. 2 and No. 5 for details.", "3 firms failed."]),
    ("I said no. Then he sat. Sun came out.", ["I said no.", "Then he sat.", "Sun came out."]),
    ("Apples, pears, etc. Then we left.", ["Apples, pears, etc.", "Then we left."]),
    ("Version 1.2.3 shipped. Good.", ["Version 1.2.3 shipped.", "Good."]),
    ("One line\nwrapped here. Two.\n\nA new paragraph without a stop\n\nlast", [
        "One line wrapped here.", "Two.", "A new paragraph without a stop", "last"]),
    ("", []),
    ("   \n ", []),
])
def test_sentences(text, sentences):
    assert split_sentences(text) == sentences


def test_the_filter_in_a_template_and_on_any_value():
    renderer = Renderer()
    scope = {"item": {"text": "The U.S. economy grew 2.5% in Q3. Prices rose."}}
    assert renderer.value("{{ item.text | sentences | length }}", scope) == 2
    assert renderer.value("{{ item.text | sentences | first }}", scope) == "The U.S. economy grew 2.5% in Q3."
    assert renderer.value("{{ 42 | sentences }}", scope) == ["42"]


def test_long_runs_of_marks_and_text_split_in_one_pass():
    text = "." * 200_000 + " A" + " Word." * 50_000
    sentences = split_sentences(text)
    assert len(sentences) == 50_001 and sentences[0] == "." * 200_000
