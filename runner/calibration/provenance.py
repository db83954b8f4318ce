"""What `runner eval` says of the run it scores besides the scores: whether it is a run of
the labels' input, and the run's hints that still hold.

Labels name no input file, so the check goes by where they sit and what joined: labels kept
beside an input of the run's kind (`labelled/labels.jsonl` beside `labelled/report.md`)
describe that input; a run of another file there, labels without a result, or a partial run
each get a warning on stderr (the scores are still written: the user may mean it).

A run's hint about failed calls is repeated only when the run's calls.jsonl still bears it
out (runner/llm/tally.py): a hint an older runner wrote about models whose calls did not all
fail, or one the file no longer supports, is not repeated."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.llm.calls.file import read_calls
from runner.llm.tally import borne_out
from runner.runs.folders import CALLS_FILE
from runner.runs.manifest import read_manifest


def run_hints(run_folder: Path, summary: dict[str, Any]) -> list[str]:
    """The run's hints about failed calls that its calls.jsonl still bears out."""
    entries = [entry for entry in summary.get("failed_calls") or [] if isinstance(entry, dict) and entry.get("hint")]
    if not entries:
        return []
    return [str(entry["hint"]) for entry in borne_out(entries, read_calls(run_folder / CALLS_FILE))]


def _inputs_beside(labels: Path, suffix: str) -> list[Path]:
    try:
        return sorted(p for p in labels.resolve().parent.iterdir()
                      if p.is_file() and p.suffix == suffix and p.resolve() != labels.resolve())
    except OSError:
        return []


def input_warnings(run_folder: Path, labels: Path, report: dict[str, Any]) -> list[str]:
    manifest = read_manifest(run_folder)
    if manifest is None:
        return []
    warnings: list[str] = []
    entry = manifest.get("input") or {}
    counts = manifest.get("counts") or {}
    if manifest.get("partial") or manifest.get("interrupted"):
        warnings.append(f"{run_folder} is a partial or interrupted run ({counts.get('done')} of "
                        f"{counts.get('input_items')} item(s)): only its items are scored")
    cwd = Path(manifest.get("cwd") or ".")
    read = (cwd / entry["path"]).resolve() if entry.get("path") else None
    unmatched = len((report.get("problems") or {}).get("unmatched_labels") or [])
    if read is not None:
        beside = _inputs_beside(labels, read.suffix)
        if beside and read not in [p.resolve() for p in beside]:
            warnings.append(f"the run read {entry['path']}, but the labels {labels} sit beside "
                            f"{', '.join(p.name for p in beside)}: is this a run of the labels' input? "
                            f"({report.get('scored')} of {report.get('label_rows')} label(s) scored)")
            return warnings
    if unmatched:
        warnings.append(f"{unmatched} of {report.get('label_rows')} label(s) have no result in {run_folder} "
                        f"(its input: {entry.get('path') or 'records'}, {entry.get('items')} item(s)): "
                        "is this a run of the labels' input?")
    return warnings
