"""Run folders: each default run in its own folder under reports/<pipeline>/<group>/.

    reports/citation_judge/report-1f3a9c/
        20261122-124501/      run.json, results.jsonl, summary.json, report.md, report.html, calls.jsonl
        20261122-130210/
        latest                one line: the name of the newest complete run's folder
        latest-partial        the newest partial (--item, --filter, --limit) or interrupted run
        verification_map.json memo stores and other state shared by the runs live here

A group is one pipeline over one input: the input's stem and a short hash of its path relative
to the project (the folder holding pipelines/), the same from any working directory or machine;
`--record` runs group by a hash of their records. Only complete runs become `latest`, so diff,
eval and --failed-from compare like with like unless a partial run is named. `latest` is a text
file, not a symlink (Windows, zip files and CI artifact uploads mishandle those). A command that
takes a run accepts the run folder, its group folder (its latest run) or a `latest` file."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runner.checks.json_schema import read_schema, schema_message, validator_for
from runner.errors import InputError, RunnerError
from runner.fileio import atomic_write, read_json, read_json_lines

LATEST = "latest"
LATEST_PARTIAL = "latest-partial"
POINTERS = (LATEST, LATEST_PARTIAL)
RESULTS = "results.jsonl"
CALLS_FILE = "calls.jsonl"        # every LLM call of the run (runner/llm/calls/)
ANSWERED_FILE = "answered.jsonl"  # the items whose result a model's answer made (runner/runs/results_file.py)
VOTES_FILE = "votes.jsonl"        # each item's jury votes, which juror agreement is measured over (the same)
SUMMARY = "summary.json"
RUN_SCHEMA = "run.schema.json"
SUMMARY_SCHEMA = "summary.schema.json"


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:6]


def input_identity(input_path: Path, project_dir: Path) -> str:
    """The input's path relative to the project (POSIX), or its absolute path outside it."""
    resolved = input_path.resolve()
    try:
        return resolved.relative_to(project_dir.resolve()).as_posix()
    except ValueError:
        return resolved.as_posix()


def group_name(input_path: Path | None, records: list[str], project_dir: Path) -> str:
    """`report-1f3a9c`: the input's stem and a hash of its identity (see the module's text)."""
    if input_path is None:
        return f"record-{short_hash(chr(10).join(records))}"
    return f"{input_path.stem}-{short_hash(input_identity(input_path, project_dir))}"


def new_run_dir(group: Path) -> Path:
    """A fresh folder named by the UTC start time (names sort in start order)."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    group.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, 1000):
        candidate = group / (stamp if attempt == 1 else f"{stamp}-{attempt:03d}")
        with contextlib.suppress(FileExistsError):
            candidate.mkdir()
            return candidate
    raise RunnerError(f"{group}: cannot make a new run folder for {stamp}")


def mark_latest(run_dir: Path, summary: dict[str, Any]) -> None:
    """Point `latest` (a complete run) or `latest-partial` at this run, whose summary.json is `summary`."""
    pointer = LATEST if is_whole(summary) else LATEST_PARTIAL
    atomic_write(run_dir.parent / pointer, run_dir.name + "\n")


def is_run(folder: Path) -> bool:
    return (folder / RESULTS).is_file() and (folder / SUMMARY).is_file()


def is_complete(folder: Path) -> bool:
    """A run over its whole input that finished."""
    return is_whole(read_summary(folder))


def is_whole(summary: dict[str, Any]) -> bool:
    """A summary of a run over its whole input that finished."""
    return not summary.get("partial") and not summary.get("interrupted")


def unfinished(folder: Path) -> bool:
    """A run over its whole input (its run.json not `partial`) that was interrupted: the items it
    never judged are still to judge."""
    manifest = read_checked(folder / "run.json", RUN_SCHEMA) or {}
    return bool(read_summary(folder).get("interrupted")) and not manifest.get("partial")


def runs_in(group: Path, complete_only: bool = True) -> list[Path]:
    """The finished runs of a group (the complete ones unless asked), oldest first: by when each
    started (run.json), then by name (a run id is its start time; an `--out` folder's name is not)."""
    if not group.is_dir():
        return []
    runs = sorted((p for p in group.iterdir() if p.is_dir() and is_run(p)), key=started)
    return [p for p in runs if is_complete(p)] if complete_only else runs


def started(run: Path) -> tuple[str, str]:
    """When a run started (run.json's `started_at`; '' when unknown or the file is damaged), and its name."""
    try:
        when = (read_checked(run / "run.json", RUN_SCHEMA) or {}).get("started_at")
    except InputError:
        when = None
    return (when if isinstance(when, str) else "", run.name)


def _pointed(group: Path, pointer: str) -> Path | None:
    file = group / pointer
    if file.is_file():
        target = group / file.read_text(encoding="utf-8").strip()
        if is_run(target):
            return target
    return None


def latest_run(group: Path) -> Path | None:
    """The newest complete run of a group."""
    pointed = _pointed(group, LATEST)
    if pointed is not None and is_complete(pointed):
        return pointed
    runs = runs_in(group)
    return runs[-1] if runs else None


def resolve_run(location: Path) -> Path:
    """A run folder from a run folder, a group folder (its latest complete run) or a `latest(-partial)` file."""
    if location.name in POINTERS and location.is_file():
        pointed = _pointed(location.parent, location.name)
        if location.name == LATEST_PARTIAL and pointed is not None:
            return pointed
        location = location.parent
    if is_run(location):
        return location
    if location.is_dir():
        latest = latest_run(location)
        if latest is not None:
            return latest
        partial = runs_in(location, complete_only=False)
        if partial:
            raise RunnerError(f"{location}: holds only partial or interrupted runs (newest: {partial[-1].name}); "
                              f"name one, or {location / LATEST_PARTIAL}")
        raise RunnerError(f"{location}: not a run folder (no {RESULTS} and {SUMMARY}) and holds no runs")
    raise RunnerError(f"{location}: no such run folder")


def previous_run(run_dir: Path) -> Path | None:
    """The newest complete run of the same group started before this one."""
    earlier = [p for p in runs_in(run_dir.parent) if started(p) < started(run_dir)]
    return earlier[-1] if earlier else None


def newest_group(reports: Path = Path("reports")) -> Path | None:
    """The group under reports/<pipeline>/<group>/ whose latest run (complete or not) finished last."""
    pointers = [p for name in POINTERS for p in reports.glob(f"*/*/{name}") if p.is_file()]
    return max(pointers, key=lambda p: p.stat().st_mtime).parent if pointers else None


def is_item_number(value: Any) -> bool:
    """An item's `index`: a whole number from 1 (never a bool, a float or a text)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**63


def iter_results(folder: Path) -> Iterator[dict[str, Any]]:
    """A run's results one at a time, each an object with an item number (a line without
    `index` takes its line number); anything else is a message naming the file and line."""
    path = folder / RESULTS
    for number, result in read_json_lines(path):
        yield checked_result(result, path, number)


def checked_result(result: Any, path: Path, number: int) -> dict[str, Any]:
    if not isinstance(result, dict):
        raise InputError(f"{path}:{number}: not a result (a JSON object), but {type(result).__name__}")
    index = result.setdefault("index", number)
    if not is_item_number(index):
        raise InputError(f"{path}:{number}: index {str(index)[:40]!r} is not an item number")
    return result


def read_summary(folder: Path) -> dict[str, Any]:
    """A run's summary.json ({} when there is none), each field runner reads type-checked."""
    return read_checked(folder / SUMMARY, SUMMARY_SCHEMA) or {}


def read_checked(path: Path, schema: str) -> dict[str, Any] | None:
    """run.json or summary.json (None when there is none), its fields checked against `schema`:
    a damaged file is an InputError naming the file and field, never misread (`"partial": "no"`)."""
    if not path.is_file():
        return None
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a run's {path.name} (a JSON object), but {type(data).__name__}")
    from jsonschema.exceptions import best_match
    error = best_match(validator_for(read_schema(schema)).iter_errors(data))
    if error is not None:
        field = ".".join(str(part) for part in error.absolute_path) or "the file"
        message = schema_message(error)
        message = message if len(message) <= 200 else message[:197] + "..."
        raise InputError(f"{path}: {field}: {message}")
    return data
