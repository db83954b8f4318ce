"""json (a list or one object), jsonl (one record per line) and yaml adapters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from runner.errors import InputError
from runner.inputs import Record, adapter, decode, read_text
from runner.yamlpos import alias_problem


def _as_records(data: Any) -> list[Record]:
    return [Record(v) for v in data] if isinstance(data, list) else [Record(data)]


@adapter("json")
def read_json(path: Path, options: dict[str, Any]) -> list[Record]:
    """A JSON file: a list of records (one item each) or one object (one item)."""
    text = read_text(path)
    try:
        return _as_records(json.loads(text))
    except json.JSONDecodeError as exc:
        # A file of one JSON object per line is JSONL; read it as such.
        if text.lstrip().startswith("{") and "\n" in text.strip():
            return read_jsonl(path, options)
        raise InputError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None


@adapter("jsonl")
def read_jsonl(path: Path, options: dict[str, Any]) -> list[Record]:
    """JSON Lines: one record per line (a bad line is an item with an error, the others go on)."""
    records: list[Record] = []
    data = path.read_bytes()
    for number, raw in enumerate(data.removeprefix(b"\xef\xbb\xbf").splitlines(), start=1):
        # One bad line (not UTF-8, not JSON, nested too deeply) fails only its own item.
        try:
            line = decode(raw, str(path), number)
            if not line.strip():
                continue
            records.append(Record(json.loads(line)))
        except InputError as exc:
            records.append(Record({"line": number}, error=str(exc)))
        except json.JSONDecodeError as exc:
            records.append(Record({"line": number}, error=f"{path}:{number}:{exc.colno}: not valid JSON: {exc.msg}"))
        except RecursionError:
            records.append(Record({"line": number}, error=f"{path}:{number}: JSON nested too deeply to read"))
    return records


@adapter("yaml")
def read_yaml(path: Path, options: dict[str, Any]) -> list[Record]:
    """A YAML file (safe loading): a list of records or one mapping."""
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
