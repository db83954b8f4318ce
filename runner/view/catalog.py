"""The runs under REPORTS_DIR, newest first, each from its summary.json and run.json, and
the one place a path from a request becomes a run folder (inside REPORTS_DIR, or refused)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from runner.errors import InputError
from runner.outputs.report_view import item_label, lookup
from runner.runs.folders import SUMMARY, is_run

MANIFEST = "run.json"
_PATTERNS = ("*/*/*/" + SUMMARY, "*/*/" + SUMMARY, "*/" + SUMMARY, SUMMARY)
_MAX_JSON = 16 * 1024 * 1024


@dataclass
class RunEntry:
    path: str                      # under REPORTS_DIR, with /
    pipeline: str
    input: str
    started: str
    duration_s: float | None
    total: int
    planned: int | None
    errors: int
    partial: bool
    interrupted: bool
    counts: dict[str, int] = field(default_factory=dict)
    rates: dict[str, float | None] = field(default_factory=dict)
    cost: float = 0.0
    summary: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """What made the run: `run`, or `probe` (its folder holds probe.html)."""
        return str(self.manifest.get("kind") or "run")

    @property
    def verdict_field(self) -> str | None:
        return self.summary.get("count_by")

    @property
    def report_columns(self) -> list[str] | None:
        resolved = (self.manifest.get("pipeline") or {}).get("resolved") or {}
        columns = (resolved.get("summary") or {}).get("report_columns") if isinstance(resolved, dict) else None
        return columns if isinstance(columns, list) else None


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from a run folder, or {} when it is missing, too big or not an object."""
    try:
        if path.stat().st_size > _MAX_JSON:
            return {}
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def run_entry(reports: Path, folder: Path) -> RunEntry:
    summary = read_json(folder / SUMMARY)
    manifest = read_json(folder / MANIFEST)
    rates = {name: summary.get(name) for name in summary if f"{name}_count" in summary}
    models = summary.get("models")
    cost = sum(float(m["cost"]) for m in (models.values() if isinstance(models, dict) else [])
               if isinstance(m, dict) and isinstance(m.get("cost"), (int, float)))
    started, ended = manifest.get("started_at"), manifest.get("ended_at")
    duration = None
    try:
        if started and ended:
            duration = (datetime.fromisoformat(ended) - datetime.fromisoformat(started)).total_seconds()
    except (TypeError, ValueError):
        pass
    input_path = (manifest.get("input") or {}).get("in_project") or (manifest.get("input") or {}).get("path")
    relative = folder.relative_to(reports)
    return RunEntry(path=relative.as_posix(), pipeline=str(summary.get("pipeline") or relative.parts[0]),
                    input=str(input_path or (relative.parts[1] if len(relative.parts) > 2 else "-")),
                    started=str(started or folder.name), duration_s=duration,
                    total=_int(summary.get("total")), planned=summary.get("planned"),
                    errors=_int(summary.get("errors")), partial=bool(summary.get("partial")),
                    interrupted=bool(summary.get("interrupted")),
                    counts={str(k): _int(v) for k, v in (summary.get("counts") or {}).items()}
                    if isinstance(summary.get("counts"), dict) else {},
                    rates=rates, cost=cost, summary=summary, manifest=manifest)


def list_runs(reports: Path) -> list[RunEntry]:
    folders = {p.parent for pattern in _PATTERNS for p in reports.glob(pattern)
               if not p.parent.name.startswith(".") and is_run(p.parent)}
    entries = [run_entry(reports, folder) for folder in folders if _inside(reports, folder)]
    return sorted(entries, key=lambda e: (e.started, e.path), reverse=True)


def run_folder(reports: Path, relative: str) -> Path:
    """The run folder a request names, only when it is a run inside REPORTS_DIR (no `..`,
    no absolute path, no symlink that leads out)."""
    if not relative or relative.startswith("/") or "\\" in relative or "\0" in relative \
            or any(part in ("", ".", "..") for part in relative.split("/")):
        raise InputError(f"'{relative}' is not a run under the reports folder")
    folder = reports / relative
    if not _inside(reports, folder) or not is_run(folder):
        raise InputError(f"'{relative}' is not a run under the reports folder")
    return folder


def _inside(reports: Path, folder: Path) -> bool:
    try:
        folder.resolve(strict=True).relative_to(reports.resolve(strict=True))
    except (OSError, ValueError):
        return False
    return True


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def describe(columns: list[str] | None) -> Any:
    """(label, reason) of a result: its key inputs, and why it got its verdict."""
    def of(result: dict[str, Any]) -> tuple[str, str]:
        return item_label(result, columns), reason_of(result)
    return of


def reason_of(result: dict[str, Any]) -> str:
    """The result's `reason`, or the first reason inside it (a jury's), else its error."""
    for candidate in (lookup(result, "reason"), *(v.get("reason") for v in result.values() if isinstance(v, dict))):
        if isinstance(candidate, str) and candidate:
            return candidate
    error = result.get("error")
    return error if isinstance(error, str) else ""
