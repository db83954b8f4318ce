"""quote_match's source scans (runner/text/quotes.py) are written for speed: they must find what
their plain spellings find."""

from __future__ import annotations

import random
import re

from runner.text import quotes


def test_the_fast_scans_find_what_the_plain_patterns_find():
    plain_irregular = re.compile("\\s*[\\x00\"'`]+\\s*|\\s{2,}|[^\\x00-\\x7f]\\s*")
    plain_hyphen = re.compile(r"(?<=\w)[-\u00ad][ \t]*\r?\n[ \t]*(?=\w)")
    alphabet = [chr(code) for code in range(0x80)] + list("\u00a0\u2028\u0085é“”’…\u200b\u00ad\U0001f600")
    rng = random.Random(11)
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        assert [m.span() for m in quotes.IRREGULAR.finditer(text)] == \
            [m.span() for m in plain_irregular.finditer(text)], repr(text)
        assert [m.span() for m in quotes.HYPHEN_BREAK.finditer(text)] == \
            [m.span() for m in plain_hyphen.finditer(text)], repr(text)
