"""Run folders: each default run in its own folder under reports/<pipeline>/<input stem>/.

    reports/citation_judge/report/
        20261122-124501/      results.jsonl, summary.json, report.md, report.html, llm_logs/
        20261122-130210/
        latest                one line: the name of the newest finished run's folder
        verification_map.json memo stores and other state shared by the runs live here

`latest` is a small text file rather than a symlink: symlinks need privileges on Windows
and are dropped or followed by zip files and CI artifact uploads; a text file works
everywhere. Every command that takes a run accepts the run folder, its group folder (meaning
its latest run) or the `latest` file itself."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runner.errors import InputError, RunnerError
from runner.fileio import atomic_write
from runner.jsonread import read_json, read_json_lines

LATEST = "latest"
RESULTS = "results.jsonl"
SUMMARY = "summary.json"


def new_run_dir(group: Path, now: datetime | None = None) -> Path:
    """A fresh folder named by the UTC start time (names sort in start order)."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    group.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, 1000):
        candidate = group / (stamp if attempt == 1 else f"{stamp}-{attempt:03d}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise RunnerError(f"{group}: cannot make a new run folder for {stamp}")


def remove_if_empty(run_dir: Path) -> None:
    """Remove a run folder that holds nothing (its run failed before writing)."""
    try:
        run_dir.rmdir()
    except OSError:                 # not empty, or already gone
        pass


def mark_latest(run_dir: Path) -> None:
    atomic_write(run_dir.parent / LATEST, run_dir.name + "\n")


def is_run(folder: Path) -> bool:
    return (folder / RESULTS).is_file() and (folder / SUMMARY).is_file()


def runs_in(group: Path) -> list[Path]:
    """The finished runs of a group, oldest first."""
    if not group.is_dir():
        return []
    return sorted((p for p in group.iterdir() if p.is_dir() and is_run(p)), key=lambda p: p.name)


def latest_run(group: Path) -> Path | None:
    pointer = group / LATEST
    if pointer.is_file():
        target = group / pointer.read_text(encoding="utf-8").strip()
        if is_run(target):
            return target
    runs = runs_in(group)
    return runs[-1] if runs else None


def resolve_run(location: Path) -> Path:
    """A run folder from a run folder, a group folder (its latest run) or a `latest` file."""
    if location.name == LATEST and location.is_file():
        location = location.parent
    if is_run(location):
        return location
    if location.is_dir():
        latest = latest_run(location)
        if latest is not None:
            return latest
        raise RunnerError(f"{location}: not a run folder (no {RESULTS} and {SUMMARY}) and holds no runs")
    raise RunnerError(f"{location}: no such run folder")


def previous_run(run_dir: Path) -> Path | None:
    earlier = [p for p in runs_in(run_dir.parent) if p.name < run_dir.name]
    return earlier[-1] if earlier else None


def newest_group(reports: Path = Path("reports")) -> Path | None:
    """The group under reports/<pipeline>/<stem>/ whose latest run finished last."""
    pointers = [p for p in reports.glob(f"*/*/{LATEST}") if p.is_file()]
    return max(pointers, key=lambda p: p.stat().st_mtime).parent if pointers else None


def is_item_number(value: Any) -> bool:
    """An item's `index`: a whole number from 1 (never a bool, a float or a text)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**63


def read_results(folder: Path) -> list[dict[str, Any]]:
    """A run's results, each an object with an item number (a line without `index` takes
    its line number); anything else is a message naming the file and line."""
    path = folder / RESULTS
    results = []
    for number, result in read_json_lines(path):
        if not isinstance(result, dict):
            raise InputError(f"{path}:{number}: not a result (a JSON object), but {type(result).__name__}")
        index = result.setdefault("index", number)
        if not is_item_number(index):
            raise InputError(f"{path}:{number}: index {str(index)[:40]!r} is not an item number")
        results.append(result)
    return results


def read_summary(folder: Path) -> dict[str, Any]:
    """A run's summary.json ({} when there is none), checked where commands read it."""
    path = folder / SUMMARY
    if not path.is_file():
        return {}
    summary = read_json(path)
    if not isinstance(summary, dict):
        raise InputError(f"{path}: not a run summary (a JSON object), but {type(summary).__name__}")
    if not isinstance(summary.get("count_by", ""), (str, type(None))):
        raise InputError(f"{path}: count_by is not a field name")
    if not isinstance(summary.get("counts", {}), (dict, type(None))):
        raise InputError(f"{path}: counts is not an object of value -> count")
    return summary
