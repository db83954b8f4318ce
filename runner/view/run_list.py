"""The runs under REPORTS_DIR, newest first, each from its summary.json and run.json, and
the one place a path from a request becomes a run folder (inside REPORTS_DIR, or refused).

A run that has not written its summary.json yet is listed too: `running` while its process
holds the folder's lock, `interrupted` once that process is gone (killed with SIGKILL, or
its machine stopped) and run.json still says it runs."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from runner.engine.rates import pass_check, rate_entries
from runner.errors import InputError
from runner.fileio import read_json
from runner.pipeline.model import SummarySpec
from runner.runs.folders import RESULTS, SUMMARY, is_run, read_summary
from runner.runs.lock import held
from runner.runs.manifest import MANIFEST, read_manifest
from runner.templating.sandbox import Renderer
from runner.tracing.feedback import RUN_DEPTHS


@dataclass
class RunEntry:
    path: str                      # under REPORTS_DIR, with /
    pipeline: str
    started: str
    state: str                     # finished, partial, interrupted, running, or unreadable
    input: str = "-"
    duration_s: float | None = None
    total: int = 0
    planned: int | None = None
    errors: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    rates: dict[str, dict[str, Any]] = field(default_factory=dict)     # rates.NAME entries (engine/rates)
    cost: float = 0.0
    summary: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None     # why its run.json or summary.json cannot be read
    probe: dict[str, int] | None = None   # a probe run's originals and copies (its figures are the originals')

    @property
    def kind(self) -> str:
        """What made the run: `run`, or `probe` (its folder holds probe.html)."""
        return str(self.manifest.get("kind") or "run")

    @property
    def verdict_field(self) -> str | None:
        """The field results are counted by: summary.json's, or before it exists the pipeline's."""
        return self.summary.get("count_by") or SummarySpec.of(self.resolved.get("summary")).count_by

    @property
    def resolved(self) -> dict[str, Any]:
        """The pipeline as the run resolved it (run.json), {} when unknown."""
        resolved = (self.manifest.get("pipeline") or {}).get("resolved")
        return resolved if isinstance(resolved, dict) else {}

    @property
    def verdicts(self) -> list[str] | None:
        """The values the verdict can take, as run.json keeps them (None: open, or not kept)."""
        given = (self.manifest.get("pipeline") or {}).get("verdicts")
        return [str(v) for v in given] if isinstance(given, list) else None

    @property
    def report_columns(self) -> list[str] | None:
        return SummarySpec.of(self.resolved.get("summary")).report_columns

    @property
    def reason_field(self) -> str | None:
        return SummarySpec.of(self.resolved.get("summary")).reason_field


def run_entry(reports: Path, folder: Path) -> RunEntry:
    """The run's entry; InputError when its run.json or summary.json cannot be read."""
    summary = read_summary(folder)
    manifest = read_manifest(folder) or {}
    rates = rate_entries(summary)
    models = summary.get("models") or {}
    cost = sum(float(m["cost"]) for m in models.values() if isinstance(m.get("cost"), (int, float)))
    started, ended = manifest.get("started_at"), manifest.get("ended_at")
    duration = None
    with contextlib.suppress(ValueError):
        if started and ended:
            duration = (datetime.fromisoformat(ended) - datetime.fromisoformat(started)).total_seconds()
    relative = folder.relative_to(reports)
    total = summary.get("total")
    if total is None:     # no summary yet: its results so far, counted in blocks (a run that died may have millions)
        with (folder / RESULTS).open("rb") as handle:
            total = sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b""))
    entry = RunEntry(path=relative.as_posix(), pipeline=str(summary.get("pipeline") or relative.parts[0]),
                     input=_input(manifest) or (relative.parts[1] if len(relative.parts) > 2 else "-"),
                     started=str(started or folder.name), duration_s=duration, total=total,
                     planned=summary.get("planned") or (manifest.get("counts") or {}).get("planned"),
                     errors=summary.get("errors") or 0, state=_state(folder, summary),
                     counts=summary.get("counts") or {}, rates=rates, cost=cost, summary=summary, manifest=manifest)
    if entry.kind == "probe":
        _originals(entry, folder)
    return entry


def _originals(entry: RunEntry, folder: Path) -> None:
    """A probe run's counts, errors and rates are its originals' (probe.json), not those of the
    originals and their perturbed copies together."""
    report = read_json(folder / "probe.json") if (folder / "probe.json").is_file() else {}
    originals = report.get("originals") if isinstance(report, dict) else None
    if not isinstance(originals, dict):
        entry.probe = {"originals": 0, "copies": 0}
        return
    entry.probe = {"originals": int(originals.get("items") or 0), "copies": int(report.get("copies") or 0)}
    entry.counts = dict(originals.get("counts") or {})
    entry.errors = int(originals.get("errors") or 0)
    entry.rates = {name: rate for name, rate in (originals.get("rates") or {}).items() if isinstance(rate, dict)}


def _input(manifest: dict[str, Any]) -> str | None:
    """The input as the user named it: its path in the project, else as given on the command line."""
    entry = manifest.get("input") or {}
    in_project, given = entry.get("in_project"), entry.get("path")
    return in_project if in_project and not Path(in_project).is_absolute() else given or in_project


def _state(folder: Path, summary: dict[str, Any]) -> str:
    if not summary:
        return "running" if held(folder) else "interrupted"
    return "interrupted" if summary.get("interrupted") else "partial" if summary.get("partial") else "finished"


def list_runs(reports: Path) -> list[RunEntry]:
    folders = {p.parent for depth in RUN_DEPTHS for p in reports.glob(depth + RESULTS)
               if not p.parent.name.startswith(".") and _a_run(p.parent)}
    entries = [_listed(reports, folder) for folder in folders if _inside(reports, folder)]
    return sorted(entries, key=lambda e: (e.started, e.path), reverse=True)


def _listed(reports: Path, folder: Path) -> RunEntry:
    """The run's entry, or one that says why it cannot be read (the other runs are still listed)."""
    try:
        return run_entry(reports, folder)
    except InputError as exc:
        relative = folder.relative_to(reports)
        return RunEntry(path=relative.as_posix(), pipeline=relative.parts[0], started=folder.name, state="unreadable",
                        problem=str(exc))


def _a_run(folder: Path) -> bool:
    """A finished run, or one with results and run.json but no summary.json yet (running, or died running)."""
    return is_run(folder) or ((folder / RESULTS).is_file() and (folder / MANIFEST).is_file()
                              and not (folder / SUMMARY).exists())


def run_folder(reports: Path, relative: str) -> Path:
    """The run folder a request names, only when it is a run inside REPORTS_DIR (no `..`,
    no absolute path, no symlink that leads out)."""
    folder = reports / relative         # an empty or absolute path has an empty part
    if "\\" in relative or "\0" in relative or any(part in ("", ".", "..") for part in relative.split("/")) \
            or not _inside(reports, folder) or not _a_run(folder):
        raise InputError(f"'{relative}' is not a run under the reports folder")
    return folder


def _inside(reports: Path, folder: Path) -> bool:
    try:
        folder.resolve(strict=True).relative_to(reports.resolve(strict=True))
    except (OSError, ValueError):
        return False
    return True


def run_pass_check(entry: RunEntry) -> Callable[[dict[str, Any]], bool | None] | None:
    """Whether a result meets the run's pass rule (`summary.pass_when`, else its first rate),
    as report.html colours it: None when the rule cannot be read here (a rule on env values,
    which run.json does not keep); no check at all when the pipeline has no rule."""
    params = entry.resolved.get("params")
    scope = {"params": params if isinstance(params, dict) else {}, "env": {}, "run": {}}
    checked = pass_check(SummarySpec.of(entry.resolved.get("summary")), Renderer(read_only=True), scope)
    if checked is None:
        return None
    rule, check = checked
    unreadable = None if "env." in rule.expression else False     # run.json keeps no env values

    def passed(result: dict[str, Any]) -> bool | None:
        said = check(result)
        return unreadable if said is None else said       # undefined on an item: it fails, as in report.html
    return passed


def first_text(result: dict[str, Any], names: tuple[str, ...]) -> str:
    """The first string field of these names, at the top or one object down."""
    places = [result, *(v for v in result.values() if isinstance(v, dict))]
    found = (place.get(name) for name in names for place in places)
    return next((value for value in found if isinstance(value, str) and value), "")
