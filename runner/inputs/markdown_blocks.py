"""A markdown report as blocks (paragraphs, headings, list items, quotes), each with the
number of its first line: from a string, or read from a file line by line so that a report
of any size is never held whole.

Both split exactly where BLOCK_SPLIT splits the whole text: at blank lines (a line's end
and every whitespace-only line after it that ends in a newline) and before a line that
opens a heading, a list item or a quote. Lines end at "\\n" only, as the pattern's do."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from runner.fileio import decode

BLOCK_SPLIT = re.compile(r"\n\s*\n|\n(?=\s*(?:#{1,6}\s|[-*+]\s|\d+[.)]\s|>))")
OPENS_BLOCK = re.compile(r"\s*(?:#{1,6}\s|[-*+]\s|\d+[.)]\s|>)")
BOM = b"\xef\xbb\xbf"


def text_blocks(text: str) -> Iterator[tuple[int, str]]:
    position, line = 0, 1
    for separator in BLOCK_SPLIT.finditer(text):
        yield line, text[position:separator.start()]
        line += text.count("\n", position, separator.end())
        position = separator.end()
    yield line, text[position:]


def file_lines(path: Path) -> Iterator[str]:
    """The file's lines, each with its "\\n" (the last maybe without), decoded one at a time (a
    leading BOM dropped); a byte that is not UTF-8 is an InputError naming its line and column."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1:
                raw = raw.removeprefix(BOM)
            try:
                yield raw.decode("utf-8")       # a BOM further on is text, as in the whole file
            except UnicodeDecodeError:
                decode(raw, str(path), number)     # raises, naming the line and column


def check_utf8(path: Path) -> None:
    for _ in file_lines(path):
        pass


def file_blocks(path: Path) -> Iterator[tuple[int, str]]:
    block: list[str] = []          # the current block's lines, each with its newline
    first = 1                      # the current block's first line
    blanks: list[str] = []         # whitespace-only lines ending in a newline after the block's last line
    number = 0
    for number, line in enumerate(file_lines(path), start=1):
        if not number == 1 and line.endswith("\n") and (not line[:-1] or line[:-1].isspace()):
            blanks.append(line)
            continue
        if number == 1:
            block = [line]
            continue
        if blanks or OPENS_BLOCK.match(line):
            yield first, "".join(block)[:-1]            # the newline ending it belongs to the separator
            block, first, blanks = [line], number, []
        else:
            block.append(line)
    if blanks:
        yield first, "".join(block)[:-1]
        yield number + 1, ""
    else:
        yield first, "".join(block)
