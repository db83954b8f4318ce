"""json (a list or one object), jsonl (one record per line) and yaml adapters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from runner.errors import InputError
from runner.fileio import NotJson, parse_json
from runner.inputs import Record, adapter, decode, read_text
from runner.yamlpos import alias_problem


def _as_records(data: Any) -> list[Record]:
    return [Record(v) for v in data] if isinstance(data, list) else [Record(data)]


@adapter("json")
def read_json(path: Path, options: dict[str, Any]) -> list[Record]:
    text = read_text(path)
    try:
        return _as_records(parse_json(text, str(path)))
    except NotJson:
        # A file of one JSON object per line is JSONL; read it as such.
        if text.lstrip().startswith("{") and "\n" in text.strip():
            return read_jsonl(path, options)
        raise


@adapter("jsonl")
def read_jsonl(path: Path, options: dict[str, Any]) -> list[Record]:
    records: list[Record] = []
    data = path.read_bytes()
    for number, raw in enumerate(data.removeprefix(b"\xef\xbb\xbf").splitlines(), start=1):
        # One bad line (not UTF-8, not JSON, nested too deeply) fails only its own item.
        try:
            line = decode(raw, str(path), number)
            if line.strip():
                records.append(Record(parse_json(line, str(path), number)))
        except InputError as exc:
            records.append(Record({"line": number}, error=str(exc)))
    return records


@adapter("yaml")
def read_yaml(path: Path, options: dict[str, Any]) -> list[Record]:
    loader = yaml.SafeLoader(read_text(path))
    try:
        node = loader.get_single_node()
        refused = alias_problem(node) if node is not None else None
        if refused:
            mark = refused[0].start_mark
            raise InputError(f"{path}:{mark.line + 1}:{mark.column + 1}: {refused[1]}")
        return _as_records(loader.construct_document(node) if node is not None else None)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise InputError(f"{where}: not valid YAML: {exc.problem}") from None
    finally:
        loader.dispose()
