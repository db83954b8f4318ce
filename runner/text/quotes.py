"""Does this quote appear in this source text? Right where naive fuzzy matching is wrong.

Both texts are normalised (keeping a map back to source offsets); the quote is located
exactly, else with rapidfuzz's partial alignment, then scored by the share of its
characters covered by aligned blocks inside the located span. Numbers and negations
must agree both ways, splices and invented text fail, and ellipses split the quote into
segments that must match in order."""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain
from typing import Any

from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein

METHOD_VERSION = "quote_match/1"
MIN_WORDS_FOR_FUZZY = 4
MIN_BLOCK = 3                     # aligned runs shorter than this are coincidence, not quotation
GAP_CHARS = 12                    # unquoted source text between aligned parts that makes a splice
INVENTED_CHARS = 8                # unmatched quote head/tail this long (and 2+ words) is invented
DEFAULT_SEARCH_IN = ("context_before", "cited")   # the seeds search context_before + cited text
FAILING_FLAGS = {"changed_number", "negation", "gap", "out_of_order", "invented_text"}
FLAG_REASONS = {
    "changed_number": "a number differs from the source",
    "negation": "a negation (not, no, never, ...) differs from the source",
    "gap": "joins passages that are apart in the source",
    "out_of_order": "its parts appear in a different order in the source",
    "invented_text": "contains words that are not in the source",
}

LINE_TAG = re.compile(r"\[L\d+\]\s?")
# The hyphen first, its word character looked behind: the engine then skips to hyphens
# instead of trying a lookbehind at every character.
HYPHEN_BREAK = re.compile(r"[-\u00ad](?<=\w[-\u00ad])[ \t]*\r?\n[ \t]*(?=\w)")
QUOTE_MARKS = set("\"'`´“”„‟«»‹›‘’‚‛′″‴〝〞＂＇")
INVISIBLE = {"\u00ad", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"}
DASHES = set("\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2043\ufe58\ufe63\uff0d")
ELLIPSIS = re.compile(r"\[\s*(?:\.\s*){3}\]|\[\s*…\s*\]|(?:\.\s*){3}|…")
EMPHASIS = re.compile(r"(\*{1,3}|_{1,3})(?=\S)(.+?)(?<=\S)\1")
ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|>~])")
BRACKETED = re.compile(r"\[([^\[\]]{1,40})\]")
NUMBER = re.compile(r"\d+(?:[.,:/]\d+)*")
NEGATIONS = {"not", "no", "never", "nor", "without", "except", "unless", "cannot", "n't", "none", "neither"}
WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?|§")


@dataclass
class Normalized:
    text: str
    offsets: list[int]            # offsets[i] = index in the original of text[i]


# Only "irregular" spots need a Python step: quotation marks and deleted spans (with the whitespace
# around them), whitespace runs, non-ASCII characters; the runs between are copied in bulk. The
# lookahead (the plain characters' complement: a class spelling out the rest of Unicode is slow to
# compile) lets the engine pass over plain characters without trying each alternative.
IRREGULAR = re.compile("(?=[^!#-&(-_a-~\\x01-\\x08\\x0e-\\x1b\\x7f])"
                       "(?:\\s*[\\x00\"'`]+\\s*|\\s{2,}|[^\\x00-\\x7f]\\s*)")
_SPACES = str.maketrans("\t\n\r\x0b\x0c", "     ")
_DELETED = "\x00"


def normalize_with_map(original: str, deletions: Sequence[tuple[int, int]] = ()) -> Normalized:
    """Casefold, fold accents and compatibility forms, unify dashes, drop quotation marks and
    invisible characters, collapse whitespace; remember where each character came from."""
    text = original
    if deletions:
        chars = list(original)
        for start, end in deletions:
            chars[start:end] = _DELETED * (end - start)
        text = "".join(chars)
    out: list[str] = []
    offsets: list[int] = []

    def emit(pieces: tuple[str, ...] | str, at: int) -> None:
        for piece in pieces:
            if piece == " " and (not out or out[-1].endswith(" ")):
                continue
            out.append(piece)
            offsets.append(at)

    position = 0
    for spot in chain(IRREGULAR.finditer(text), [None]):
        index = spot.start() if spot else len(text)
        if index > position:
            run = text[position:index].translate(_SPACES).lower()
            skip = 1 if run[0] == " " and (not out or out[-1].endswith(" ")) else 0
            out.append(run[skip:])
            offsets.extend(range(position + skip, index))
        if spot is None:
            break
        position = spot.end()
        found = spot.group()
        first = found.lstrip()[:1]
        if first and first not in _DELETED + "\"'`":
            emit(_fold(first), index + len(found) - len(found.lstrip()))
            if found[1:] and found[1:].isspace():
                emit(" ", index + 1)
        elif any(char.isspace() for char in found):
            emit(" ", index)
    trimmed = "".join(out).rstrip(" ")
    return Normalized(trimmed, offsets[:len(trimmed)])


@lru_cache(maxsize=4096)
def _fold(char: str) -> tuple[str, ...]:
    """What one special character becomes: nothing, a space, or folded characters."""
    if char in INVISIBLE or char in QUOTE_MARKS:
        return ()
    return tuple(" " if piece.isspace() else "-" if piece in DASHES else piece
                 for piece in unicodedata.normalize("NFKD", char).casefold()
                 if unicodedata.category(piece) != "Mn" and piece not in QUOTE_MARKS and piece not in INVISIBLE)


def quote_segments(quote: str) -> list[str]:
    """Markdown emphasis and escapes removed, split at ellipses, [T]he unwrapped."""
    text = ESCAPE.sub(r"\1", HYPHEN_BREAK.sub("", LINE_TAG.sub("", quote)))
    for _ in range(2):
        text = EMPHASIS.sub(r"\2", text)
    parts = [BRACKETED.sub(r"\1", part) for part in ELLIPSIS.split(text)]
    segments = [normalize_with_map(p).text.strip(" ,;:") for p in parts]
    return [s for s in segments if s]


@dataclass
class SegmentMatch:
    start: int                    # in the normalised source
    end: int
    matched: int                  # quote characters covered by aligned blocks
    exact: bool
    flags: set[str] = field(default_factory=set)


@dataclass
class QuoteMatch:
    passed: bool
    score: float
    status: str
    matched_text: str
    lines: list[int] | None
    in_cited_range: bool | None
    flags: list[str]
    method_version: str = METHOD_VERSION
    threshold: float = 0.8

    @property
    def reason(self) -> str:
        """One line a re-ask can quote."""
        if self.status == "EXACT":
            return "found verbatim"
        if self.passed:
            return f"found with small differences (score {self.score:.2f})"
        if self.status == "NOT_FOUND":
            return "not found in the source"
        failing = "; ".join(FLAG_REASONS[f] for f in self.flags if f in FLAG_REASONS)
        return failing or f"only partly found (score {self.score:.2f}, needs {self.threshold:.2f})"

    def as_dict(self) -> dict[str, Any]:
        return {**{k: v for k, v in vars(self).items() if k != "threshold"}, "reason": self.reason}


class Source:
    """Source text with its line numbers (parts may be non-contiguous line ranges)."""

    def __init__(self, parts: list[tuple[str, int]], cited: tuple[int, int] | None = None):
        self.text = "\n".join(text for text, _ in parts)
        self.cited = cited
        self._starts: list[int] = []
        self._numbers: list[int] = []
        position = 0
        for text, first_line in parts:
            for number, line in enumerate(text.split("\n")):
                self._starts.append(position)
                self._numbers.append(first_line + number)
                position += len(line) + 1
        deleted = [*LINE_TAG.finditer(self.text), *HYPHEN_BREAK.finditer(self.text)]
        self.norm = normalize_with_map(self.text, [m.span() for m in deleted])

    def line_of(self, offset: int) -> int:
        return self._numbers[max(0, bisect.bisect_right(self._starts, offset) - 1)] if self._numbers else 1

    def in_cited(self, norm_start: int, norm_end: int) -> bool | None:
        if self.cited is None or norm_end <= norm_start:
            return None
        first = self.line_of(self.norm.offsets[norm_start])
        last = self.line_of(self.norm.offsets[norm_end - 1])
        return self.cited[0] <= first and last <= self.cited[1]


def _word_bounded(text: str, start: int, end: int) -> bool:
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    return not (before.isalnum() or after.isalnum())


def _exact(source: Source, segment: str, after: int) -> list[int]:
    hits, position = [], source.norm.text.find(segment, after)
    while position != -1:
        if _word_bounded(source.norm.text, position, position + len(segment)):
            hits.append(position)
        position = source.norm.text.find(segment, position + 1)
    return hits


def _fuzzy(source: Source, segment: str, after: int) -> SegmentMatch | None:
    haystack = source.norm.text[after:]
    if not haystack:
        return None
    if len(segment) > len(haystack):
        window_start, window = 0, haystack          # never let rapidfuzz swap needle and haystack
    else:
        found = fuzz.partial_ratio_alignment(segment, haystack)
        if found is None:       # only with a score cutoff, which is not set: kept for the type
            return None
        margin = max(20, len(segment) // 4)
        window_start = max(0, found.dest_start - margin)
        window = haystack[window_start:found.dest_end + margin]
    blocks = [(op.src_start, op.dest_start, op.src_end - op.src_start)
              for op in Levenshtein.opcodes(segment, window)
              if op.tag == "equal" and op.src_end - op.src_start >= MIN_BLOCK]
    if not blocks:
        return None
    flags: set[str] = set()
    for (a1, b1, n1), (a2, b2, _) in zip(blocks, blocks[1:], strict=False):
        source_gap = window[b1 + n1:b2]
        quote_gap = segment[a1 + n1:a2]
        if len(source_gap) - len(quote_gap) >= GAP_CHARS and len(WORD.findall(source_gap)) >= 2:
            flags.add("gap")
    for extra in (segment[:blocks[0][0]], segment[blocks[-1][0] + blocks[-1][2]:]):     # its head and tail
        if len(extra.strip()) >= INVENTED_CHARS and len(WORD.findall(extra)) >= 2:
            # Text that is in the source, but elsewhere, makes a splice; text that is nowhere is invented.
            flags.add("gap" if _found_elsewhere(source, extra.strip(" ,;:")) else "invented_text")
    offset = after + window_start
    return SegmentMatch(offset + blocks[0][1], offset + blocks[-1][1] + blocks[-1][2],
                        sum(n for _, _, n in blocks), False, flags)


def _found_elsewhere(source: Source, part: str) -> bool:
    if part in source.norm.text:
        return True
    if len(part) > len(source.norm.text) or len(part.split()) < MIN_WORDS_FOR_FUZZY:
        return False
    return fuzz.partial_ratio(part, source.norm.text) >= 90


def _critical(text: str) -> tuple[list[str], list[str]]:
    numbers = sorted(NUMBER.findall(text)) + ["§"] * text.count("§")
    negations = sorted(w for w in WORD.findall(text.replace("n't", " n't")) if w in NEGATIONS)
    return numbers, negations


def _expand_to_words(text: str, start: int, end: int) -> tuple[int, int]:
    while start > 0 and text[start - 1].isalnum():
        start -= 1
    while end < len(text) and text[end].isalnum():
        end += 1
    return start, end


def _locate(source: Source, segment: str, after: int, flags: set[str]) -> SegmentMatch | None:
    hits = _exact(source, segment, after)
    if hits:
        if len(hits) > 1:
            flags.add("ambiguous")
            inside = [h for h in hits if source.in_cited(h, h + len(segment))]
            hits = inside or hits
        return SegmentMatch(hits[0], hits[0] + len(segment), len(segment), True)
    if len(segment.split()) < MIN_WORDS_FOR_FUZZY:
        flags.add("short_quote")
        return None
    match = _fuzzy(source, segment, after)
    if match is not None:       # numbers and negations must agree both ways
        start, end = _expand_to_words(source.norm.text, match.start, match.end)
        span = source.norm.text[start:end]
        pairs = zip(("changed_number", "negation"), _critical(segment), _critical(span), strict=True)
        match.flags |= {flag for flag, quoted, found in pairs if quoted != found}
    return match


def match_quote(quote: str, source: Source | str, threshold: float = 0.8) -> QuoteMatch:
    if isinstance(source, str):
        source = Source([(source, 1)])
    segments = quote_segments(quote)
    flags: set[str] = set()
    if not segments or not source.norm.text:
        return QuoteMatch(False, 0.0, "NOT_FOUND", "", None, None, ["empty_quote" if not segments else "empty_source"],
                          threshold=threshold)
    if sum(len(s.split()) for s in segments) < MIN_WORDS_FOR_FUZZY:
        flags.add("short_quote")
    matches: list[SegmentMatch] = []
    after = 0
    for segment in segments:
        match = _locate(source, segment, after, flags)
        if after > 0 and (match is None or not match.exact):
            earlier = _locate(source, segment, 0, set())
            if earlier is not None and earlier.start < after and earlier.matched > (match.matched if match else 0):
                flags.add("out_of_order")
        if match is None:
            continue
        flags |= match.flags
        matches.append(match)
        after = match.end
    score = round(sum(m.matched for m in matches) / sum(len(s) for s in segments), 4)     # segments are never empty
    passed = score >= threshold and not flags & FAILING_FLAGS
    exact = passed and len(matches) == len(segments) and all(m.exact for m in matches)
    status = "EXACT" if exact else "MATCH" if passed else "PARTIAL" if score >= 0.5 else "NOT_FOUND"
    if not matches or status == "NOT_FOUND":   # a few stray aligned characters are no location worth reporting
        return QuoteMatch(False, score, "NOT_FOUND", "", None, None, sorted(flags), threshold=threshold)
    start, end = _expand_to_words(source.norm.text, matches[0].start, matches[-1].end)
    first, last = source.norm.offsets[start], source.norm.offsets[end - 1]
    return QuoteMatch(passed, score, status, source.text[first:last + 1], [source.line_of(first), source.line_of(last)],
                      source.in_cited(start, end), sorted(flags), threshold=threshold)


def source_from_read_lines(result: dict[str, Any], search_in: list[str]) -> Source:
    """A read_lines result as a Source over the parts named in `search_in`."""
    start, end = int(result.get("start") or 1), int(result.get("end") or result.get("start") or 1)
    parts: list[tuple[str, int]] = []
    for name in search_in:
        if name == "context_before" and result.get("context_before"):
            parts.append((result["context_before"], int(result.get("context_start") or start)))
        elif name == "cited" and result.get("cited_text") is not None:
            parts.append((result["cited_text"], start))
        elif name == "context_after" and result.get("context_after"):
            parts.append((result["context_after"], end + 1))
    return Source(parts, (start, end))


def quote_match_function(quote: str, text: Any, threshold: float = 0.8,
                         search_in: list[str] | None = None) -> dict[str, Any]:
    """The Jinja function `quote_match(quote, text, threshold)`."""
    source = source_from_read_lines(text, search_in or list(DEFAULT_SEARCH_IN)) if isinstance(text, dict) \
        else Source([(str(text), 1)])
    return match_quote(str(quote), source, float(threshold)).as_dict()
