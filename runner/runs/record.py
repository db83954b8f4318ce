"""One run's record: its manifest (run.json), whether it is partial (over `--item`, `--filter`
or `--limit`: never `latest`), and a `--failed-from` rerun's parent, whose results for the
items not redone its results.jsonl holds: its summary, report, diff and next `--failed-from`
cover the whole input, never a shrinking set."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner import __version__
from runner.errors import InputError, Terminated
from runner.fileio import now
from runner.inputs import ItemStream
from runner.pipeline.model import Pipeline
from runner.pipeline.overrides import MODEL_FLAG
from runner.runs.folders import RESULTS, is_complete, resolve_run, unfinished
from runner.runs.manifest import (
    FORMAT,
    input_entry,
    judged_otherwise,
    pipeline_entry,
    read_manifest,
    redact_assignment,
    run_key,
    shown_path,
    write_manifest,
)
from runner.runs.request import ItemSource, RunOptions
from runner.runs.results_file import result_lines, results_in_order


@dataclass
class RunOutcome:
    pipeline: Pipeline
    out_dir: Path
    results: Sequence[dict[str, Any]]     # once the run ends, a lazy view over its results.jsonl
    summary: dict[str, Any]
    record: RunRecord
    interrupted: bool = False      # by Ctrl-C or SIGTERM: what finished is written
    terminated: bool = False       # by SIGTERM
    formats: list[str] = field(default_factory=list)

    def stop_if_interrupted(self) -> None:
        """Stop, as the interruption would have, a caller that needs the whole run: Ctrl-C
        raises KeyboardInterrupt and SIGTERM Terminated (the CLI: exit 130 or 143)."""
        if self.interrupted:
            raise Terminated() if self.terminated else KeyboardInterrupt()


def _valued(flags: Iterable[tuple[str, Any]]) -> list[str]:
    """`--flag value` for each flag given a value (not None)."""
    return [text for flag, value in flags if value is not None for text in (flag, str(value))]


def command_line(kind: str, pipeline: Pipeline, source: ItemSource, options: RunOptions, overrides: list[str],
                 formats: list[str], parent: Path | None, out: Path | None) -> list[str]:
    """The `runner run` (or probe: `kind`) command that makes this run again from the same directory."""
    chosen = source.selection
    argv = ["runner", kind, str(pipeline.file)]
    argv += _valued([
        ("--input", source.input_path), ("--input-format", source.input_format or None),
        *(("--record", redact_assignment(record)) for record in source.records),
        *(("--model", redact_assignment(o[len(MODEL_FLAG):])) if o.startswith(MODEL_FLAG)
          else ("--set", redact_assignment(o)) for o in overrides),
        ("--item", chosen.item), ("--filter", chosen.filter or None), ("--failed-from", parent),
        ("--limit", source.limit or None), ("--out", out),
        ("--concurrency", options.llm_concurrency), ("--cache-dir", options.cache_dir)])
    argv += [flag for flag, given in (("--no-cache", options.no_cache), ("--batch", options.batch)) if given]
    argv += _valued([("--trace", options.trace or None), *(("--format", name) for name in formats),
                     ("--fail-under", None if options.fail_under is None else f"{options.fail_under:g}")])
    return argv + list(options.command_flags)


@dataclass
class RunRecord:
    manifest: dict[str, Any]
    planned: int                          # results the run would hold had it finished
    input_items: int
    partial: bool
    parent: Path | None = None            # a --failed-from rerun's parent run
    selected: set[str] = field(default_factory=set)     # a rerun's items, by their content key
    run_dir: Path | None = None

    @classmethod
    def plan(cls, pipeline: Pipeline, source: ItemSource, options: RunOptions, overrides: list[str],
             items: ItemStream, formats: list[str], executor: dict[str, Any] | None = None,
             kind: str = "run") -> RunRecord:
        """Everything known before the run (`items` counted, never held); refuses a --failed-from
        over another input, or of a run that judged its items otherwise (its results would stand
        beside this run's, judged two ways)."""
        selected_count = len(items)
        input_items = source.input_items if source.input_items is not None else selected_count
        entry = input_entry(source.input_path, source.records, pipeline.project_dir, input_items, source.stdin_copy)
        parent = (Path(shown_path(resolve_run(source.selection.failed_from)))
                  if source.selection.failed_from is not None else None)
        narrowed = source.selection.item is not None or bool(source.selection.filter or source.limit)
        key = run_key(options.cache_dir)
        planned, partial, selected = selected_count, narrowed, set()
        if parent is not None:
            earlier = read_manifest(parent) or {}
            parent_input = earlier.get("input") or {}
            if parent_input.get("sha256") and parent_input.get("sha256") != entry.get("sha256"):
                raise InputError(f"--failed-from {parent}: that run read another input ({parent_input.get('path')}, "
                                 f"content {str(parent_input['sha256'])[:12]}) than {entry.get('path')} "
                                 f"(content {str(entry.get('sha256'))[:12]}); rerun the whole input instead")
            differs = judged_otherwise(earlier, pipeline, key)
            if differs:
                raise InputError(f"--failed-from {parent}: that run judged its items otherwise ({'; '.join(differs)}), "
                                 "so its results cannot stand beside this run's; run without --failed-from to judge "
                                 "every item this way (calls that did not change come from the LLM cache)")
            selected = {item.key for item in items}     # only a rerun's: its failures
            planned = sum(1 for _ in result_lines(parent / RESULTS))     # the rerun items are the parent's own
            partial = not is_complete(parent)
            if unfinished(parent):      # and those it never judged: the whole input, unless a selection narrows it
                redone = sum(1 for result in results_in_order(parent) if result.get("item_key") in selected)
                planned, partial = planned + selected_count - redone, narrowed
        manifest = {
            "format": FORMAT, "kind": kind, "runner_version": __version__, "status": "running",
            "started_at": now(),
            "ended_at": None, "interrupted": False, "cwd": os.getcwd(), "python": sys.version.split()[0],
            "argv": command_line(kind, pipeline, source, options, overrides, formats, parent, options.out_dir),
            "pipeline": pipeline_entry(pipeline, overrides, key), "input": entry,
            "selection": {"item": source.selection.item, "filter": source.selection.filter,
                          "failed_from": str(parent) if parent else None, "limit": source.limit},
            "partial": partial, "rerun_of": str(parent) if parent else None,
            "counts": {"input_items": input_items, "selected": selected_count, "planned": planned},
            "options": {"concurrency": options.llm_concurrency, "no_cache": options.no_cache,
                        "cache_dir": str(options.cache_dir), "trace": options.trace, "formats": formats,
                        "batch": options.batch, **(executor or {"executor": "local", "workers": None})},
        }
        return cls(manifest, planned, input_items, partial, parent, selected)

    def begin(self, run_dir: Path, explicit_out: bool, models: dict[str, Any]) -> None:
        """Write run.json (status running) into the claimed run folder, with `models` as resolved."""
        self.run_dir = run_dir
        self.manifest["models"] = models
        self.manifest["group"] = None if explicit_out else str(run_dir.parent)
        write_manifest(run_dir, self.manifest)

    def summary_fields(self, results: Iterable[dict[str, Any]]) -> dict[str, Any]:
        """What summary.json says of the run's extent (read by the reports and the CLI's line)."""
        fields: dict[str, Any] = {"planned": self.planned, "input_items": self.input_items, "partial": self.partial}
        if self.parent is not None:
            fields["rerun_of"] = str(self.parent)
            fields["rerun_items"] = sum(1 for r in results if r.get("item_key") in self.selected)
        return fields

    def finish(self, outcome: RunOutcome, failed: bool) -> None:
        """Rewrite run.json with how the run ended (an interrupted run did not fail) and its counts."""
        if self.run_dir is None:
            return
        self.manifest.update({
            "status": "interrupted" if outcome.interrupted else "failed" if failed else "finished",
            "ended_at": now(), "interrupted": outcome.interrupted,
        })
        self.manifest["counts"].update({"done": outcome.summary.get("total"), "errors": outcome.summary.get("errors")})
        write_manifest(self.run_dir, self.manifest)
