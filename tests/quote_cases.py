"""The quote-matching case set over real public-domain text, shared by the tests and
bench/quote_match.py. Each case: id, class, quote, source, whether it must pass, and
an optional flag it must carry."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

CANONICAL = Path(__file__).resolve().parent.parent / "examples" / "citation_judge" / "data" / "canonical"
CON = (CANONICAL / "us_constitution.txt").read_text(encoding="utf-8")
DEC = (CANONICAL / "declaration_of_independence.txt").read_text(encoding="utf-8")
FED = (CANONICAL / "federalist_51.txt").read_text(encoding="utf-8")
MIT = (CANONICAL / "mit_license.txt").read_text(encoding="utf-8")
BUDGET = ("The committee approved a budget of $4.2 million for fiscal year 2023, an increase of 15% over the "
          "prior year, as provided in § 12 of the charter.")


def window(text: str, anchor: str, size: int) -> str:
    """A `size`-character slice of `text` with `anchor` inside it."""
    at = text.index(anchor)
    start = max(0, min(at - (size - len(anchor)) // 2, len(text) - size))
    return text[start:start + size]


def big_window() -> str:
    lines = CON.splitlines()
    random.Random(7).shuffle(lines)
    filler = "\n".join(line for line in lines if "Ambition" not in line and "Permission" not in line)
    text = CON + "\n" + DEC + "\n" + filler + "\n" + FED + "\n" + MIT
    return text[-20000:]


BIG = big_window()


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    quote: str
    source: str
    passes: bool
    flag: str | None = None


CASES = [
    Case("exact_line_break_1", "exact over line breaks",
         "Congress shall make no law respecting an establishment of religion, or prohibiting the free exercise thereof",
         CON, True),
    Case("exact_line_break_2", "exact over line breaks",
         "to be secure in their persons, houses, papers, and effects, against unreasonable searches and seizures",
         CON, True),
    Case("window_200_a", "exact in 200 chars", "Ambition must be made to counteract ambition.",
         window(FED, "Ambition must be", 200), True),
    Case("window_200_b", "exact in 200 chars", "Permission is hereby granted, free of charge, to any person obtaining a copy",
         window(MIT, "Permission is hereby", 200), True),
    Case("window_2000_a", "exact in 2,000 chars",
         "all men are created equal, that they are endowed by their Creator with certain unalienable Rights",
         (DEC + FED)[:2000], True),
    Case("window_2000_b", "exact in 2,000 chars", "If men were angels, no government would be necessary.",
         window(CON + FED, "If men were angels", 2000), True),
    Case("window_20000_a", "exact in 20,000 chars",
         "The above copyright notice and this permission notice shall be included in all copies", BIG, True),
    Case("window_20000_b", "exact in 20,000 chars",
         "you must first enable the government to control the governed", BIG, True),
    Case("case_upper", "case and spacing", "CONGRESS SHALL MAKE NO LAW respecting an establishment", CON, True),
    Case("spacing", "case and spacing", "the  right of the people   peaceably to\tassemble", CON, True),
    Case("curly_quotes", "typography", "THE SOFTWARE IS PROVIDED “AS IS”, WITHOUT WARRANTY OF ANY KIND", MIT, True),
    Case("em_dash", "typography", "the pursuit of Happiness\u2014That to secure these rights, Governments are instituted",
         DEC, True),
    Case("nbsp", "typography", "Ambition\u00a0must be made to counteract\u00a0ambition", FED, True),
    Case("zero_width", "typography", "If men were\u200b angels, no govern\u200bment would be necessary", FED, True),
    Case("ligature", "typography", "you must \ufb01rst enable the government to control the governed", FED, True),
    Case("accents", "typography", "The cafe owner signed the naive resume on Tuesday",
         "Minutes. The caf\u00e9 owner signed the nai\u0308ve r\u00e9sum\u00e9 on Tuesday, as agreed.", True),
    Case("source_quotes_dropped_1", "source quotation marks", "THE SOFTWARE IS PROVIDED AS IS, WITHOUT WARRANTY",
         MIT, True),
    Case("source_quotes_dropped_2", "source quotation marks",
         "files (the Software), to deal in the Software without restriction", MIT, True),
    Case("one_typo", "typos", "Ambition must be made to counteract ambitoin", FED, True),
    Case("two_typos", "typos", "If men were angles, no government would be neccessary", FED, True),
    Case("ellipsis_in_order_1", "ellipsis",
         "We the People of the United States ... establish this Constitution for the United States of America",
         CON, True),
    Case("ellipsis_in_order_2", "ellipsis",
         "Excessive bail shall not be required \u2026 cruel and unusual punishments inflicted", CON, True),
    Case("ellipsis_out_of_order_1", "ellipsis",
         "cruel and unusual punishments inflicted ... Excessive bail shall not be required", CON, False, "out_of_order"),
    Case("ellipsis_out_of_order_2", "ellipsis",
         "to petition the Government for a redress of grievances [...] Congress shall make no law", CON, False,
         "out_of_order"),
    Case("brackets_1", "brackets", "[T]he right of the people to keep and bear Arms, shall not be infringed", CON, True),
    Case("brackets_2", "brackets", "[the] Congress shall have Power To lay and collect Taxes", CON, True),
    Case("changed_number", "changed number", "The committee approved a budget of $4.5 million for fiscal year 2023",
         BUDGET, False, "changed_number"),
    Case("changed_date", "changed number", "IN CONGRESS, July 4, 1777. The unanimous Declaration", DEC, False,
         "changed_number"),
    Case("changed_year", "changed number", "approved a budget of $4.2 million for fiscal year 2024", BUDGET, False,
         "changed_number"),
    Case("changed_percent", "changed number", "an increase of 18% over the prior year, as provided", BUDGET, False,
         "changed_number"),
    Case("changed_section", "changed number", "over the prior year, as provided in § 13 of the charter", BUDGET,
         False, "changed_number"),
    Case("negation_dropped_1", "negation", "the right of the people to keep and bear Arms, shall be infringed",
         CON, False, "negation"),
    Case("negation_dropped_2", "negation", "Congress shall make law respecting an establishment of religion",
         CON, False, "negation"),
    Case("negation_added_1", "negation", "the Senate may not propose or concur with Amendments as on other Bills",
         CON, False, "negation"),
    Case("negation_added_2", "negation", "If men were angels, government would never be necessary", FED, False,
         "negation"),
    Case("paraphrase_1", "paraphrase",
         "Lawmakers cannot pass statutes that set up an official church or stop people from worshipping", CON, False),
    Case("paraphrase_2", "paraphrase", "People must be protected from unreasonable searches by the government",
         CON, False),
    Case("invented_tail", "invented text",
         "Ambition must be made to counteract ambition, and so every senator must be elected directly by voters",
         FED, False),
    Case("invented_head", "invented text",
         "As every modern court has repeatedly held, excessive bail shall not be required", CON, False),
    Case("longer_than_window", "longer than window",
         "Ambition must be made to counteract ambition. The interest of the man must be connected with the "
         "constitutional rights of the place. It may be a reflection on human nature, that such devices should be "
         "necessary to control the abuses of government.",
         window(FED, "Ambition must be", 120), False),
    Case("longer_than_source", "longer than window",
         "Permission is hereby granted, free of charge, to any person obtaining a copy of this software and "
         "associated documentation files, and the authors promise lifelong support at no cost whatsoever",
         "Permission is hereby granted, free of charge, to any person obtaining a copy", False),
    Case("spliced_1", "splice",
         "Ambition must be made to counteract ambition. A dependence on the people is, no doubt, the primary "
         "control on the government", FED, False, "gap"),
    Case("spliced_2", "splice",
         "The executive Power shall be vested in a President of the United States of America, which shall consist "
         "of a Senate and House of Representatives", CON, False),
    Case("same_sentence_twice_in_source", "same sentence twice", "Ambition must be made to counteract ambition.",
         FED.replace("PUBLIUS.", "Ambition must be made to counteract ambition.\nPUBLIUS."), True, "ambiguous"),
    Case("same_sentence_twice_in_quote", "same sentence twice",
         "Ambition must be made to counteract ambition. Ambition must be made to counteract ambition.", FED, False),
    Case("short_exact", "short and ambiguous", "the people", CON, True, "short_quote"),
    Case("short_typo", "short and ambiguous", "the peeple", CON, False, "short_quote"),
    Case("hyphenation_1", "hyphenation",
         "The provision for defense must in this, as in all other cases, be made commensurate",
         FED.replace("The provision for defense", "The provision for de-\nfense"), True),
    Case("hyphenation_2", "hyphenation", "the necessary constitutional means and personal motives",
         FED.replace("necessary constitutional", "necessary constitu-\n  tional"), True),
]
