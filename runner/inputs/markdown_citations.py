"""Citations in a markdown report: `[LABEL:Lnnn](target)` and `[LABEL:Lnnn-Lmmm](target)`.

Per citation: `file` (the label), `target` (the link, informational), `start`, `end`,
`claim` (the sentence holding the citation, up to it; when the citation directly follows
a sentence's end, that sentence), `quote` (the longest double-quoted span of the claim,
else the claim) and `index` (1-based)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from . import Record, adapter

DEFAULT_PATTERN = r"\[(?P<file>[^\]:\n]+):L(?P<start>\d+)(?:-L?(?P<end>\d+))?\]\((?P<target>[^)\s]*)\)"
DEFAULT_ABBREVIATIONS = ["e.g.", "i.e.", "etc.", "vs.", "cf.", "al.", "Mr.", "Mrs.", "Ms.", "Dr.", "St.",
                         "No.", "Art.", "Sec.", "U.S.", "U.K.", "Inc.", "Ltd.", "Co.", "Fig.", "p.", "pp."]
QUOTE_SPANS = re.compile(r"\"([^\"\n]+)\"|“([^”\n]+)”")
SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*(?=\s|\x00|$)")
BLOCK_SPLIT = re.compile(r"\n\s*\n|\n(?=\s*(?:#{1,6}\s|[-*+]\s|\d+[.)]\s|>))")
LINE_PREFIX = re.compile(r"^\s*(?:#{1,6}\s+|[-*+]\s+|\d+[.)]\s+|>\s*)")
MASK = "\x00"


@adapter("markdown_citations")
def read_citations(path: Path, options: dict[str, Any]) -> list[Record]:
    return [Record(c) for c in extract_citations(path.read_text(encoding="utf-8"), options)]


def extract_citations(text: str, options: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    options = options or {}
    pattern = re.compile(options.get("pattern", DEFAULT_PATTERN))
    abbreviations = options.get("abbreviations", DEFAULT_ABBREVIATIONS)
    citations: list[dict[str, Any]] = []
    for block_start, block in _blocks(text):
        matches = list(pattern.finditer(block))
        if not matches:
            continue
        masked = _mask(block, matches)
        ends = _sentence_ends(masked, abbreviations)
        for match in matches:
            claim = _claim(block, masked, ends, match.start())
            start = int(match.group("start"))
            end = int(match.group("end")) if match.groupdict().get("end") else start
            citations.append({
                "index": len(citations) + 1,
                "file": match.group("file").strip(),
                "target": match.groupdict().get("target") or "",
                "start": start,
                "end": end,
                "claim": claim,
                "quote": _quote(claim),
                "line": text.count("\n", 0, block_start + match.start()) + 1,
            })
    return citations


def _blocks(text: str) -> list[tuple[int, str]]:
    out, position = [], 0
    for separator in BLOCK_SPLIT.finditer(text):
        out.append((position, text[position:separator.start()]))
        position = separator.end()
    out.append((position, text[position:]))
    return out


def _mask(block: str, matches: list[re.Match[str]]) -> str:
    chars = list(block)
    for match in matches:
        chars[match.start():match.end()] = MASK * (match.end() - match.start())
    return "".join(chars)


def _sentence_ends(masked: str, abbreviations: list[str]) -> list[int]:
    """Offsets just past each sentence-ending punctuation mark."""
    ends = []
    for match in SENTENCE_END.finditer(masked):
        before = masked[:match.start() + 1]
        if any(before.endswith(a) and (len(before) == len(a) or not before[-len(a) - 1].isalnum())
               for a in abbreviations):
            continue
        if re.search(r"\d\.$", before) and re.match(r"\.\d", masked[match.start():]):
            continue
        ends.append(match.end())
    return ends


def _claim(block: str, masked: str, ends: list[int], position: int) -> str:
    before = [e for e in ends if e <= position]
    start = before[-1] if before else 0
    if not _clean(masked[start:position]) and before:
        # The citation directly follows a sentence's end: the claim is that sentence.
        position = start
        start = before[-2] if len(before) > 1 else 0
    return _clean(masked[start:position])


def _clean(span: str) -> str:
    text = span.replace(MASK, " ")
    lines = [LINE_PREFIX.sub("", line) for line in text.splitlines()]
    text = " ".join(" ".join(lines).split())
    return text.strip(" ,;:")


def _quote(claim: str) -> str:
    spans = [m.group(1) or m.group(2) for m in QUOTE_SPANS.finditer(claim)]
    return max(spans, key=len).strip() if spans else claim
