"""The csv adapter: a header row, then one record per row (the standard library's csv reader).

UTF-8 with or without a BOM, LF or CRLF line ends, quoted fields (a quoted field may hold the
delimiter, doubled quotes and line breaks). Every cell is text unless `with.types` declares
its column: `integer`, `number`, `boolean` (true/false, yes/no, 1/0) or `json`; an empty cell
of a typed column is null. A row that cannot be read (a field count unlike the header's, a
cell that is not its column's type, bytes that are not UTF-8) is an item whose error names
the file and line; the other rows go on. What makes the whole file unusable (no header, an
empty or repeated column name, a type for a column the header lacks) is refused before the
first record. Rows are read one at a time: memory stays flat in the size of the file."""

from __future__ import annotations

import contextlib
import csv
import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from runner.errors import InputError
from runner.fileio import TOO_MANY_DIGITS, NotJson, decode, parse_json
from runner.inputs import Record, adapter, takes

TYPES = ("string", "integer", "number", "boolean", "json")
TRUE, FALSE = ("true", "yes", "1"), ("false", "no", "0")
WHAT = {"integer": "an integer", "number": "a number", "boolean": "a boolean (true/false, yes/no, 1/0)", "json": "JSON"}

takes("csv", {
    "type": "object", "additionalProperties": False,
    "properties": {
        "types": {"type": "object", "additionalProperties": {"enum": list(TYPES)},
                  "description": "Column name -> string, integer, number, boolean or json (default: string)."},
        "delimiter": {"type": "string", "minLength": 1, "maxLength": 1,
                      "description": "The field separator (default `,`; `\\t` for tab-separated files)."},
    },
})


class _Lines:
    """The file's lines as text for the csv reader, each decoded on its own: a line that is
    not UTF-8 is read with replacement characters and remembered, so only its row fails."""

    def __init__(self, path: Path):
        self.path = path
        self.number = 0                     # lines handed out so far
        self.bad: dict[int, str] = {}       # line -> why it is not text

    def __iter__(self) -> Iterator[str]:
        with self.path.open("rb") as handle:
            for raw in handle:
                self.number += 1
                try:
                    yield decode(raw, str(self.path), self.number)
                except InputError as exc:
                    self.bad[self.number] = str(exc)
                    yield raw.decode("utf-8", "replace")


@adapter("csv")
def read_csv(path: Path, options: dict[str, Any]) -> Iterator[Record]:
    """A CSV file with a header row: one record per row, keyed by the header's column names
    (cells are text unless `with.types` declares their column)."""
    lines = _Lines(path)
    reader = csv.reader(iter(lines), delimiter=options.get("delimiter", ","), strict=True)
    header, header_line = _header(path, reader, lines)
    types = options.get("types") or {}
    if missing := [name for name in types if name not in header]:
        raise InputError(f"{path}:{header_line}: input.with.types names column '{missing[0]}', which the header "
                         f"({', '.join(header)}) does not have")
    return _records(path, reader, lines, header, types)


def _header(path: Path, reader: Any, lines: _Lines) -> tuple[list[str], int]:
    """The first row that is not blank: every column named once."""
    try:
        for row in reader:
            if not row:
                continue
            if lines.bad:
                raise InputError(next(iter(lines.bad.values())))
            names = [name.strip() for name in row]
            for column, name in enumerate(names, start=1):
                if not name:
                    raise InputError(f"{path}:{lines.number}: column {column} of the header has no name")
                if names.index(name) != column - 1:
                    raise InputError(f"{path}:{lines.number}: column '{name}' is named twice in the header")
            return names, lines.number
    except csv.Error as exc:
        raise InputError(f"{path}:{lines.number}: the header is not valid CSV ({exc})") from None
    raise InputError(f"{path}: no header row (the file is empty)")


def _records(path: Path, reader: Any, lines: _Lines, header: list[str],
             types: dict[str, str]) -> Iterator[Record]:
    while True:
        line = lines.number + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:       # strict: a stray quote; the reader goes on at the next line
            yield Record({"line": line}, error=f"{path}:{line}: not valid CSV ({exc})")
            continue
        if not row or len(row) == 1 < len(header) and not row[0].strip():
            continue                    # a blank line (or one of spaces only)
        if bad := [lines.bad[n] for n in range(line, lines.number + 1) if n in lines.bad]:
            yield Record({"line": line}, error=bad[0])
        elif len(row) != len(header):
            yield Record({"line": line}, error=f"{path}:{line}: {len(row)} field(s), the header has {len(header)}")
        else:
            try:
                yield Record({name: _typed(name, cell, types.get(name, "string"))
                              for name, cell in zip(header, row, strict=True)}, line=line)
            except ValueError as exc:
                yield Record({"line": line}, error=f"{path}:{line}: {exc}")


def cell_reader(options: dict[str, Any]) -> Callable[[str, str], Any]:
    """How this adapter reads a cell of the column `name` (its `types`, else text): `--record`'s
    values for a pipeline that reads CSV, so a record is the item its row would be."""
    types = options.get("types") or {}
    return lambda name, cell: _typed(name, cell, types.get(name, "string"))


def _typed(name: str, cell: str, kind: str) -> Any:
    """The cell as its column's type (ValueError saying why it is not)."""
    text = cell.strip()
    if kind == "string" or not text:
        return cell if kind == "string" else None
    what = WHAT.get(kind, "JSON")
    if kind == "json":      # as a JSON input is read: no NaN, no key twice, no nesting past the limit
        try:
            return parse_json(text, f"column '{name}'", strict=True)
        except NotJson:
            pass
        except InputError as exc:
            raise ValueError(str(exc)) from None
    elif "_" not in text:       # Python reads 1_000 as a number: a CSV cell that says so is not one
        digits = text.lstrip("+-")
        if kind in ("integer", "number") and digits.isdigit() and len(digits) > sys.get_int_max_str_digits():
            raise ValueError(f"column '{name}': {TOO_MANY_DIGITS} (declare the column a string)")
        with contextlib.suppress(ValueError):
            if kind == "integer":
                return int(text)
            if kind == "number":
                number, what = float(text), "a finite number"
                if math.isfinite(number):
                    return int(text) if digits.isdigit() else number
            elif text.lower() in TRUE + FALSE:
                return text.lower() in TRUE
    raise ValueError(f"column '{name}': '{cell if len(cell) <= 40 else cell[:37] + '...'}' is not {what}")
