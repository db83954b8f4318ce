"""`read_lines`: cited lines with context, never leaving the declared root."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.checks.result_shapes import closed
from runner.engine.context import Runtime, StepContext
from runner.engine.steps.base import Step, register
from runner.errors import StepError
from runner.paths import FILE_NOT_FOUND, FILE_TOO_LARGE, LINES_NOT_FOUND, OK, PATH_OUTSIDE_ROOT, refusal, resolve_inside
from runner.stores.kept import digest, note_read


class FileCache:
    """Each file resolved and read once per run, and shared by every item."""

    def __init__(self) -> None:
        self.lines: dict[Path, list[str] | None] = {}
        self.digests: dict[Path, str] = {}
        self.resolve = functools.cache(resolve_inside)      # (root, name): (path, status)
        self.reads = 0

    def get(self, path: Path, encoding: str) -> list[str] | None:
        if path not in self.lines:
            try:
                raw = path.read_bytes()
                self.reads += 1
                self.digests[path] = digest(raw)
                self.lines[path] = raw.decode(encoding, errors="replace").splitlines()
            except OSError:
                self.lines[path] = None
        if path in self.digests:        # each item that reads it (a kept result is reused only while it is the same)
            note_read(path, self.digests[path])
        return self.lines[path]


def read_lines(files: FileCache, root: Path, name: str, start: int, end: int | None, context: int,
               encoding: str = "utf-8") -> dict[str, Any]:
    end = start if end is None else end
    result: dict[str, Any] = {"exists": False, "status": OK, "path": name, "start": start, "end": end,
                              "cited_text": "", "cited_text_tagged": "", "context_before": "",
                              "context_after": "", "context_start": start, "total_lines": 0, "error": None}
    path, status = files.resolve(root, name)
    lines = files.get(path, encoding) if path else None
    if path and lines is None:
        status = FILE_NOT_FOUND
    if status != OK or lines is None:
        return {**result, "status": status, "error": refusal(status, name, root, "source")}
    total = len(lines)
    result["total_lines"] = total
    if start < 1 or end < start or end > total:
        reason = (f"start line {start} is after end line {end}" if end < start
                  else f"lines {start}-{end} are outside the file ({total} lines)")
        return {**result, "status": LINES_NOT_FOUND, "error": reason}
    before_start = max(1, start - context)
    cited = lines[start - 1:end]
    return {**result, "exists": True,
            "cited_text": "\n".join(cited),
            "cited_text_tagged": "\n".join(f"[L{n}] {line}" for n, line in enumerate(cited, start)),
            "context_before": "\n".join(lines[before_start - 1:start - 1]),
            "context_after": "\n".join(lines[end:min(total, end + context)]),
            "context_start": before_start}


@dataclass(frozen=True)
class ReadLinesArgs:
    root: Any
    file: Any
    start: Any                          # line numbers: integers once rendered (checked in run)
    end: Any = None
    context: Any = 0
    encoding: str = "utf-8"


def _files(runtime: Runtime) -> FileCache:
    return FileCache()


@register
class ReadLines(Step):
    name = "read_lines"
    summary = "Read cited lines with context from a file under a root (statuses, never outside the root)."
    result = closed({"exists": {"type": "boolean"}, "status": {"enum": [OK, FILE_NOT_FOUND, LINES_NOT_FOUND,
                                                                         PATH_OUTSIDE_ROOT, FILE_TOO_LARGE]},
                     "path": {"type": "string"}, "start": {"type": "integer"}, "end": {"type": "integer"},
                     "cited_text": {"type": "string"}, "cited_text_tagged": {"type": "string"},
                     "context_before": {"type": "string"}, "context_after": {"type": "string"},
                     "context_start": {"type": "integer"}, "total_lines": {"type": "integer"},
                     "error": {"type": ["string", "null"]}})

    async def run(self, ctx: StepContext) -> Any:
        args = ctx.arguments(ReadLinesArgs)
        try:
            start = int(args.start)
            end = None if args.end in (None, "") else int(args.end)
            context = int(args.context or 0)
        except (TypeError, ValueError) as exc:
            raise StepError(f"{ctx.where('start')}: line numbers must be integers ({exc})") from None
        files = ctx.runtime.resource(_files)
        return read_lines(files, Path(str(args.root)), str(args.file), start, end, context, args.encoding)
