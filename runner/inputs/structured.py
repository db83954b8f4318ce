"""json (a list or one object), jsonl (one record per line) and yaml adapters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from ..errors import InputError
from . import Record, adapter


def _as_records(data: Any) -> list[Record]:
    return [Record(v) for v in data] if isinstance(data, list) else [Record(data)]


@adapter("json")
def read_json(path: Path, options: dict[str, Any]) -> list[Record]:
    text = path.read_text(encoding="utf-8")
    try:
        return _as_records(json.loads(text))
    except json.JSONDecodeError as exc:
        # A file of one JSON object per line is JSONL; read it as such.
        if text.lstrip().startswith("{") and "\n" in text.strip():
            return read_jsonl(path, options)
        raise InputError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None


@adapter("jsonl")
def read_jsonl(path: Path, options: dict[str, Any]) -> list[Record]:
    records: list[Record] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(Record(json.loads(line)))
        except json.JSONDecodeError as exc:
            records.append(Record({"line": number}, error=f"{path}:{number}:{exc.colno}: not valid JSON: {exc.msg}"))
    return records


@adapter("yaml")
def read_yaml(path: Path, options: dict[str, Any]) -> list[Record]:
    try:
        return _as_records(yaml.safe_load(path.read_text(encoding="utf-8")))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise InputError(f"{where}: not valid YAML: {exc.problem}") from None
