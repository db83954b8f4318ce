"""json (a list or one object), jsonl (one record per line) and yaml adapters."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from runner.errors import InputError
from runner.fileio import NotJson, decode, parse_json, read_text
from runner.inputs import Record, adapter, counts
from runner.yamlpos import load_value, where_and_why


def _as_records(data: Any) -> list[Record]:
    return [Record(v) for v in data] if isinstance(data, list) else [Record(data)]


@adapter("json")
def read_json(path: Path, options: dict[str, Any]) -> Iterable[Record]:
    """A JSON file: a list of records (one item each) or one object (one item); a file of one
    JSON object per line is JSON lines (streamed)."""
    if _json_lines(path):
        return read_jsonl(path, options)     # streamed: a JSON-lines file of any size
    text = read_text(path)
    try:
        return _as_records(parse_json(text, str(path), strict=True))
    except NotJson:         # JSON lines whose first line is broken; not a pretty-printed object with a typo
        first = text.strip().split("\n", 1)[0].strip()
        if first.startswith("{") and first.endswith("}") and "\n" in text.strip():
            return read_jsonl(path, options)
        raise


def _json_lines(path: Path) -> bool:
    """Whether the file is JSON lines: its first line a whole JSON object, another line after it
    (read from the start of the file only; anything else is decided by reading it whole). A first
    line Python cannot read (not UTF-8, a number past the digit limit, nested too deep) counts
    when it closes and the next line opens an object: it is then that line's error alone."""
    with path.open("rb") as handle:
        first = handle.readline().removeprefix(b"\xef\xbb\xbf")
        if not first.lstrip().startswith(b"{"):
            return False
        following = next((line.strip() for line in handle if line.strip()), b"")
        try:
            json.loads(first)
        except json.JSONDecodeError:
            return False
        except (ValueError, RecursionError):      # not UTF-8, a number past the digit limit, or deep
            return first.rstrip().endswith(b"}") and following.startswith(b"{")
        return bool(following)


@adapter("jsonl")
def read_jsonl(path: Path, options: dict[str, Any]) -> Iterator[Record]:
    """JSON Lines: one record per line (a bad line is an item with an error, the others go on)."""
    for number, raw in enumerate(_raw_lines(path), start=1):
        try:
            line = decode(raw, str(path), number)
            if line.strip():
                yield Record(parse_json(line, str(path), number, strict=True))
        except InputError as exc:
            yield Record({"line": number}, error=str(exc))


@counts("jsonl")
def count_jsonl(path: Path, options: dict[str, Any]) -> int:
    """How many records read_jsonl yields (a line that is not blank, readable or not), without parsing them."""
    total = 0
    for raw in _raw_lines(path):
        try:
            total += bool(raw.decode("utf-8-sig").strip())
        except UnicodeDecodeError:
            total += 1          # an item with the error
    return total


def _raw_lines(path: Path) -> Iterator[bytes]:
    """The file's lines as bytes, a leading BOM dropped (a lone \\r ends a line too)."""
    with path.open("rb") as handle:
        for number, chunk in enumerate(handle):
            yield from (chunk.removeprefix(b"\xef\xbb\xbf") if number == 0 else chunk).splitlines()


@adapter("yaml")
def read_yaml(path: Path, options: dict[str, Any]) -> list[Record]:
    """A YAML file (safe loading): a list of records or one mapping; an empty file has none (as
    an empty JSON-lines file has none: the run then warns that nothing was judged)."""
    text = read_text(path)
    if not text.strip():
        return []
    try:
        return _as_records(load_value(text))
    except yaml.YAMLError as exc:
        line, col, reason = where_and_why(exc, text)
        raise InputError(f"{path}:{line}:{col}: not valid YAML: {reason}") from None
