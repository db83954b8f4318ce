"""Sentence splitting that survives abbreviations, initials, decimals, ellipses and quotes.

A sentence ends at `.`, `!`, `?` or an ellipsis (closing quotes and brackets stay with it)
when whitespace and then a capital letter or a digit follow, or at a blank line. It does
not end after a title or a Latin abbreviation (`Dr.`, `e.g.`), after an initial (`J.`),
inside a number (`2.5`), or before a lowercase word. After an initialism (`U.S.`) it ends
only when a word that usually opens a sentence follows ("the U.S. He ..." but "the U.S.
Senate"). One left-to-right pass: linear in the text's length."""

from __future__ import annotations

import re

# Abbreviations after which a capitalised word continues the sentence.
CONTINUING = frozenset("""
mr mrs ms mx dr prof sr jr st mt ft rev fr hon gov sen rep gen col lt sgt capt cmdr adm maj pres supt
e.g i.e cf vs v viz al approx ca est no nos fig figs vol vols ch sec art p pp para eq eqs ref refs ed eds
jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thurs fri sat sun
dept univ assn bros corp inc ltd co
""".split())
# Those that are also English words count only capitalised: "No. 5", but "I said no. Then".
CAPITALISED_ONLY = frozenset("no nos art sat sun wed mar co ed gen col rep sen gov est fig vol sec ch ref "
                             "al ca v p ft mt st".split())
# Words that usually open a sentence: after an initialism (`U.S.`) they mean a new one.
OPENERS = frozenset("""
a an the this that these those there here it its he she they we i you his her their our my your
in on at by for from to as if when while after before since because although though but and or so
then however yet still also thus hence meanwhile moreover furthermore nevertheless instead today
what who why how where which
""".split())

_END = re.compile(r"(?<![.!?\u2026])(?P<end>[.!?\u2026]+)(?P<close>[\"'\u201d\u2019)\]]*)(?P<space>\s+)"
                  r"(?P<open>[\"'\u201c\u2018(\[]*)(?P<next>\w+)?")
WORD_WINDOW = 40
_WORD_BEFORE = re.compile(r"(\S+)$")
_INITIALISM = re.compile(r"^(?:[A-Za-z]\.)+[A-Za-z]$")
_BLANK_LINE = re.compile(r"\n[ \t]*\n\s*")


def split_sentences(text: object) -> list[str]:
    """The sentences of `text`, each stripped; blank lines always separate."""
    pieces: list[str] = []
    for paragraph in _BLANK_LINE.split(str(text)):
        start = 0
        for match in _END.finditer(paragraph):
            if _ends_here(paragraph, match):
                pieces.append(paragraph[start:match.end("close")])
                start = match.end("space")
        pieces.append(paragraph[start:])
    return [sentence for piece in pieces if (sentence := " ".join(piece.split()))]


def _ends_here(text: str, match: re.Match[str]) -> bool:
    following = match["next"]
    if not following or not (following[0].isupper() or following[0].isdigit()):
        return False
    if match["end"] != ".":
        return True               # !, ?, an ellipsis, or several marks
    # Only the last few characters: an abbreviation is short, and a search from the text's
    # start for every candidate would make the pass quadratic.
    before = _WORD_BEFORE.search(text[max(0, match.start() - WORD_WINDOW):match.start()])
    word = before.group(1).lstrip("\"'\u201c\u2018([") if before else ""
    key = word.lower()
    if key in CONTINUING and (key not in CAPITALISED_ONLY or word[:1].isupper()):
        return False
    if len(word) == 1 and word.isupper():
        return False              # an initial: J. Smith
    if _INITIALISM.match(word):
        return following.lower() in OPENERS
    return True
