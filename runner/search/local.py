"""Offline search over a folder of text files: passages ranked with rapidfuzz."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from rapidfuzz import fuzz, process, utils

from runner.paths import OK, resolve_inside
from runner.search import PROVIDERS, Provider, SearchFailed, SearchRequest

SUFFIXES = {".txt", ".md", ".markdown", ".rst", ".text"}
PASSAGE = re.compile(r"\S.*?(?=\n\s*\n|\Z)", re.DOTALL)     # a paragraph, from its first non-space


def _files(folder: Path) -> list[Path]:
    """The folder's text files, each a regular file inside it (a symlink out, a device or
    a FIFO is skipped, never read)."""
    if not folder.is_dir():
        raise SearchFailed(f"local search: folder '{folder}' not found")
    return [file for file in sorted(folder.rglob("*"))
            if file.suffix.lower() in SUFFIXES and resolve_inside(folder, str(file.relative_to(folder)))[1] == OK]


def _passages(folder: Path) -> list[tuple[str, str, int]]:
    """(relative path, paragraph text, first line) for every paragraph of every file."""
    out = []
    for file in _files(folder):
        text = file.read_text(encoding="utf-8", errors="replace")
        line, seen = 1, 0
        for passage in PASSAGE.finditer(text):
            line, seen = line + text.count("\n", seen, passage.start()), passage.start()
            out.append((str(file.relative_to(folder)), " ".join(passage[0].split()), line))
    return out


def folder_fingerprint(request: SearchRequest) -> str:
    """The files' names and contents: an edited folder misses the cache."""
    digest = hashlib.sha256()
    folder = Path(str(request.options.get("folder") or ""))
    try:
        files = _files(folder)
    except SearchFailed:
        return "missing"
    for file in files:
        digest.update(str(file.relative_to(folder)).encode())
        digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


async def local_search(request: SearchRequest) -> list[dict[str, Any]]:
    folder = Path(str(request.options.get("folder") or ""))
    passages = _passages(folder)
    if not passages:
        return []
    texts = [text for _, text, _ in passages]
    best = process.extract(request.query, texts, scorer=fuzz.token_set_ratio, processor=utils.default_process,
                           limit=request.max_results)
    return [{"title": f"{passages[index][0]}:L{passages[index][2]}", "path": passages[index][0],
             "content": passages[index][1], "score": round(score / 100, 4)}
            for _, score, index in best if score > 0]


PROVIDERS.add("local", Provider("local", local_search, cache_salt=folder_fingerprint))
