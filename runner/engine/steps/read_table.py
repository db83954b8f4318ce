"""`read_table`: a CSV file under a root as {columns, rows}."""

from __future__ import annotations

import contextlib
import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.checks.result_shapes import closed
from runner.engine.context import StepContext
from runner.engine.steps.base import Step, register
from runner.paths import OK, refusal, resolve_inside
from runner.stores.kept import digest, note_read


def _number(cell: str) -> Any:
    text = cell.strip()
    for kind in (int, float):
        with contextlib.suppress(ValueError):
            return kind(text)
    return cell


def read_table(root: Path, name: str, max_rows: int | None = None, delimiter: str | None = None) -> dict[str, Any]:
    path, status = resolve_inside(root, name)
    if path is None or status != OK:
        return {"exists": False, "status": status, "columns": [], "rows": [],
                "error": refusal(status, name, root, "data")}
    raw = path.read_bytes()
    note_read(path, digest(raw))        # a kept result is reused only while the file is the same
    text = raw.decode("utf-8-sig", errors="replace")
    if delimiter is None:
        try:
            delimiter = csv.Sniffer().sniff(text[:4096], delimiters=",;\t").delimiter
        except csv.Error:
            delimiter = ","
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    rows = [row for row in reader if row]
    columns = rows[0] if rows else []
    body = [[_number(cell) for cell in row] for row in rows[1:]]
    return {"exists": True, "status": OK, "columns": columns, "rows": body[:max_rows] if max_rows else body,
            "total_rows": len(body), "error": None}


@dataclass(frozen=True)
class ReadTableArgs:
    root: Any
    file: Any
    max_rows: Any = None
    delimiter: str | None = None


@register
class ReadTable(Step):
    name = "read_table"
    summary = "Read a CSV file under a root into {columns, rows}; numbers become numbers."
    result = closed({"exists": {"type": "boolean"}, "status": {"type": "string"}, "columns": {"type": "array"},
                     "rows": {"type": "array"}, "total_rows": {"type": "integer"},
                     "error": {"type": ["string", "null"]}})

    async def run(self, ctx: StepContext) -> Any:
        args = ctx.arguments(ReadTableArgs)
        max_rows = int(args.max_rows) if args.max_rows else None
        return read_table(Path(str(args.root)), str(args.file), max_rows, args.delimiter)
