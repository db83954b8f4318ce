"""Citations in a markdown report: `[LABEL:Lnnn](target)` and `[LABEL:Lnnn-Lmmm](target)`.

Per citation: `file` (the label), `target` (the link, informational), `start`, `end`,
`claim` (the sentence holding the citation, up to it; when the citation directly follows
a sentence's end, that sentence; at most MAX_CLAIM_CHARS), `quote` (the longest
double-quoted span of the claim, else the claim) and `index` (1-based). Something that
looks like a citation but is not one (`[f:L-3](x)`, `[:L1](x)`) becomes an item with an
`error`, never silence.

Linear in the report's size: the patterns cannot backtrack past the next bracket, and
sentence ends are found once per block and looked up by bisection. A report is read a block
(a paragraph, heading, list item or quote) at a time, never whole: `file_blocks` splits a file
line by line exactly where BLOCK_SPLIT splits the whole text (`text_blocks`), at blank lines (a
line's end and every whitespace-only line after it that ends in a newline) and before a line
that opens a heading, a list item or a quote. Lines end at "\\n" only, as the pattern's do."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from runner.fileio import decode
from runner.inputs import Record, adapter, counts

# Neither part may cross a `[`: a failed match then costs at most the text up to the next one.
DEFAULT_PATTERN = r"\[(?P<file>[^\[\]:\n]+):L(?P<start>\d+)(?:-L?(?P<end>\d+))?\]\((?P<target>[^)\[\s]*)\)"
# A link any way markdown writes one (a title, <a target>, [a reference]) whose label marks a line
# (`:L4`; or `:l4`, `: L4` after a name that looks like a file): what the pattern does not take is
# said, never dropped. No class spans `[` or a line: one pass, linear in the report.
LOOKS_LIKE_CITATION = re.compile(r"\[(?P<inner>[^\[\]\n]*+)\](?:\((?P<target>[^)\[\n]*+)\)|\[[^\[\]\n]*+\])")
LINE_MARK = re.compile(r":L[-\d]")
LOOSE_LINE_MARK = re.compile(r"^\s*(?P<name>[^\s:]*[./][^\s:]*)\s*:(?:\s*[Ll]\d|l[-\d])")
DEFAULT_ABBREVIATIONS = ["e.g.", "i.e.", "etc.", "vs.", "cf.", "al.", "Mr.", "Mrs.", "Ms.", "Dr.", "St.",
                         "No.", "Art.", "Sec.", "U.S.", "U.K.", "Inc.", "Ltd.", "Co.", "Fig.", "p.", "pp."]
QUOTE_SPANS = re.compile(r"\"([^\"\n]+)\"|“([^“”\n]+)”")
SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*(?=\s|\x00|$)")
LINE_PREFIX = re.compile(r"^\s*(?:#{1,6}\s+|[-*+]\s+|\d+[.)]\s+|>\s*)")
CONTROL_CHAR = re.compile(r"[\x00-\x1f]")
MASK = "\x00"
MAX_CLAIM_CHARS = 2000     # a claim is the text before its citation, at most this long
EXPECTED = "expected [FILE:Lnnn](target) or [FILE:Lnnn-Lmmm](target)"

OPENS_BLOCK = re.compile(r"\s*(?:#{1,6}\s|[-*+]\s|\d+[.)]\s|>)")
BLOCK_SPLIT = re.compile(rf"\n\s*\n|\n(?={OPENS_BLOCK.pattern})")
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


def file_blocks(path: Path) -> Iterator[tuple[int, str]]:
    block: list[str] = []          # the current block's lines, each with its newline
    first = 1                      # the current block's first line
    blank = False                  # a whitespace-only line ending in a newline after the block's last line
    number = 0
    for number, line in enumerate(file_lines(path), start=1):
        if number > 1 and line.endswith("\n") and not line[:-1].strip():
            blank = True
        elif number > 1 and (blank or OPENS_BLOCK.match(line)):
            yield first, "".join(block)[:-1]            # the newline ending it belongs to the separator
            block, first, blank = [line], number, False
        else:
            block.append(line)
    if blank:
        yield first, "".join(block)[:-1]
        yield number + 1, ""
    else:
        yield first, "".join(block)


@adapter("markdown_citations")
def read_citations(path: Path, options: dict[str, Any]) -> Iterator[Record]:
    """Every citation `[file:Lnnn](target)` or `[file:Lnnn-Lmmm](target)` of a markdown report, with its
    claim and quote: fields index, file, start, end, claim, quote."""
    for _ in file_lines(path):          # a bad byte fails the whole input, before the first record
        pass
    return _records(path, options)


@counts("markdown_citations")
def count_citations(path: Path, options: dict[str, Any]) -> int:
    """How many records read_citations yields: one per citation and per malformed one, found
    by the same patterns over the same blocks, without their claims."""
    pattern, check_malformed = _patterns(options)
    total = 0
    for _, block in file_blocks(path):
        starts = {m.start() for m in pattern.finditer(block)}
        total += len(starts) + (len(_malformed(block, starts)) if check_malformed else 0)
    return total


def _records(path: Path, options: dict[str, Any]) -> Iterator[Record]:
    for citation in _citations(file_blocks(path), options):
        error = citation.pop("error", None)
        yield Record(citation, error=f"{path}:{citation['line']}: {error}" if error else None)


def extract_citations(text: str, options: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The citations in `text`, in order; a malformed one carries an `error`."""
    return list(_citations(text_blocks(text), options))


def _citations(blocks: Iterable[tuple[int, str]], options: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
    """The citations of (first line, block) pairs, in order."""
    options = options or {}
    pattern, check_malformed = _patterns(options)
    abbreviations = options.get("abbreviations", DEFAULT_ABBREVIATIONS)
    count = 0
    for first_line, block in blocks:
        matches = list(pattern.finditer(block))
        found: list[tuple[int, re.Match[str] | None, str]] = [(m.start(), m, "") for m in matches]
        if check_malformed:
            found.extend(_malformed(block, {m.start() for m in matches}))
        if not found:
            continue
        masked = pattern.sub(lambda match: MASK * len(match[0]), block)     # the citations, blanked out
        ends = sentence_ends(masked, abbreviations)
        for position, match, raw in sorted(found, key=lambda entry: entry[0]):
            line = first_line + block.count("\n", 0, position)
            citation = _citation(masked, ends, match, line) if match else None
            if citation is None:
                raw = raw or (match.group(0) if match else "")
                citation = {"citation": raw, "line": line, "error": _what_is_wrong(raw)}
            count += 1
            yield {"index": count, **citation}


def _patterns(options: dict[str, Any]) -> tuple[re.Pattern[str], bool]:
    """The citation pattern, and whether links that look like citations are checked (only
    with the default pattern)."""
    return re.compile(options.get("pattern", DEFAULT_PATTERN)), "pattern" not in options


def _citation(masked: str, ends: list[int], match: re.Match[str], line: int) -> dict[str, Any] | None:
    """The item of one citation (an error item when a line number could be no line), or None
    when its file name is unusable."""
    name = match.group("file").strip()
    if not name or CONTROL_CHAR.search(name):
        return None
    digits = max(len(match.groupdict().get(part) or "") for part in ("start", "end"))
    if digits > 18:             # no file has such a line (and Python reads no integer past 4300 digits)
        return {"citation": match.group(0)[:200], "line": line,
                "error": f"a line number of the citation is too large to be a line ({digits} digits)"}
    claim = _claim(masked, ends, match.start())
    start = int(match.group("start"))
    end = int(match.group("end")) if match.groupdict().get("end") else start
    quotes = [m.group(1) or m.group(2) for m in QUOTE_SPANS.finditer(claim)]       # the longest is the quote
    return {"file": name, "target": match.groupdict().get("target") or "", "start": start, "end": end,
            "claim": claim, "quote": max(quotes, key=len).strip() if quotes else claim, "line": line}


def _malformed(block: str, starts: set[int]) -> list[tuple[int, None, str]]:
    """Links whose label marks a line (LINE_MARK, LOOSE_LINE_MARK) but that the citation pattern did not take."""
    return [(m.start(), None, m.group(0)) for m in LOOKS_LIKE_CITATION.finditer(block) if m.start() not in starts
            and (LINE_MARK.search(m.group("inner")) or LOOSE_LINE_MARK.match(m.group("inner")))]


def _what_is_wrong(raw: str) -> str:
    label = raw[1:raw.find("]")] if "]" in raw else raw
    name = label.rsplit(":L", 1)[0]
    if not name.strip():
        return f"citation {raw!r} names no file ({EXPECTED})"
    if CONTROL_CHAR.search(name):
        return f"citation {raw!r}: the file name holds a control character"
    return f"malformed citation {raw!r} ({EXPECTED})"


def sentence_ends(masked: str, abbreviations: list[str]) -> list[int]:
    """Offsets just past each sentence-ending punctuation mark (one pass, no rescans) that
    does not end an abbreviation."""
    abbreviation, longest = _abbreviation_ending(tuple(abbreviations))
    return [match.end() for match in SENTENCE_END.finditer(masked)
            if abbreviation is None or not abbreviation.search(masked, max(0, match.start() + 1 - longest),
                                                               match.start() + 1)]


@lru_cache(maxsize=16)
def _abbreviation_ending(abbreviations: tuple[str, ...]) -> tuple[re.Pattern[str] | None, int]:
    """A pattern finding, searched up to a sentence mark, any of the abbreviations ending
    at that mark with no letter or digit just before it (`[^\\W_]` is exactly str.isalnum;
    a lookbehind sees past where a search starts), and how far back the search must start:
    one search, not a test per abbreviation."""
    if not abbreviations:
        return None, 0
    either = "|".join(re.escape(a) for a in abbreviations)
    return re.compile(rf"(?<![^\W_])(?:{either})\Z"), max(len(a) for a in abbreviations)


def _claim(masked: str, ends: list[int], position: int) -> str:
    count = bisect_right(ends, position)          # sentence ends at or before the citation
    start = ends[count - 1] if count else 0
    # Only the last MAX_CLAIM_CHARS are ever cleaned: a long span without a sentence end (one
    # line of thousands of citations) would otherwise be cleaned again for every citation.
    if not claim_text(masked[max(start, position - MAX_CLAIM_CHARS):position]) and count:
        # The citation directly follows a sentence's end: the claim is that sentence.
        position = start
        start = ends[count - 2] if count > 1 else 0
    return claim_text(masked[max(start, position - MAX_CLAIM_CHARS):position])


def claim_text(span: str) -> str:
    """A span of the masked block as a claim's text: masks and line prefixes (quotes, list
    marks) gone, white space folded, edge punctuation trimmed. The one pass over a claim's
    text: the work of extracting a block's citations is the length of what it is given."""
    text = span.replace(MASK, " ")
    lines = [LINE_PREFIX.sub("", line) for line in text.splitlines()]
    text = " ".join(" ".join(lines).split())
    return text.strip(" ,;:")
