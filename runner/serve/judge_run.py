"""/judge's run folder: what a served pipeline variant's runtime judges is a run like any other,
in reports/<pipeline>/judge-<pipeline hash>/<start time>/ from its first item (run.json of kind
`serve`, calls.jsonl, results.jsonl), ended with its summary and reports when the variant closes.
A result answered from the store is not in it."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from runner.api import write_outputs
from runner.engine.context import Runtime
from runner.errors import RunnerError
from runner.fileio import OutputError
from runner.inputs import ItemStream
from runner.outputs.summary import ErrorCount
from runner.redact import redact
from runner.runs.folders import RESULTS, mark_latest, new_run_dir
from runner.runs.lock import OutputFolder
from runner.runs.manifest import model_entries
from runner.runs.record import RunOutcome, RunRecord
from runner.runs.request import ItemSource
from runner.runs.results_file import ResultsLog


class JudgeRun:
    """One variant's run folder, opened by its first judged item and ended when it closes."""

    def __init__(self, root: Path, runtime: Runtime, overrides: list[str]):
        self.root, self.runtime, self.overrides = root, runtime, overrides
        self.started = False
        self._open: tuple[RunOutcome, ResultsLog, ErrorCount, OutputFolder] | None = None
        self.judged = 0

    def open(self) -> None:
        """The run folder and its run.json, before the first item's calls (its calls.jsonl)."""
        if self.started:
            return
        self.started = True
        runtime, pipeline = self.runtime, self.runtime.pipeline
        folder: OutputFolder | None = None
        try:
            out = new_run_dir(self.root / "reports" / pipeline.name / f"judge-{runtime.made_by}")
            folder = OutputFolder(out).claim()
            record = RunRecord.plan(pipeline, ItemSource(), runtime.options, self.overrides, ItemStream.of([]), [],
                                    kind="serve")
            record.manifest["argv"] = []     # no command makes it again: its items came by /judge
            record.begin(out, explicit_out=False, models=model_entries(runtime.model_spec, list(pipeline.models)))
            log = ResultsLog(out / RESULTS)
        except (OSError, RunnerError) as exc:      # judging goes on; what it cannot record is said
            if folder is not None:
                folder.release()
            self._say(f"/judge of {pipeline.name} records no run folder: {exc}")
            return
        # the run's own options (the LLM service, made at the first call, writes calls.jsonl there)
        runtime.options = replace(runtime.options, out_dir=out)
        self._open = (RunOutcome(pipeline, out, [], {}, record=record), log, ErrorCount(runtime), folder)

    def keep(self, position: int, result: dict[str, Any]) -> None:
        """A judged item's result appended to results.jsonl, its LLM tally settled; a folder that
        cannot be written any more ends the recording, said once (the request is answered)."""
        if self._open is None:
            return
        outcome, log, errors, folder = self._open
        answered = errors.add(position, result)
        try:
            log.append(result, answered)
        except (OSError, RunnerError) as exc:
            self._open = None
            self._say(f"/judge's run {outcome.out_dir} stops recording: {exc}")
            try:
                with contextlib.suppress(OSError, RunnerError):
                    log.close()
                with contextlib.suppress(OSError, RunnerError):
                    outcome.record.finish(outcome, True)        # run.json says it failed, not running
            finally:
                folder.release()
            return
        self.judged += 1

    @staticmethod
    def _say(message: str) -> None:
        sys.stderr.write(redact(f"runner serve: {message}\n"))

    async def aclose(self) -> None:
        """The runtime closed, then (when the run began) its summary.json and reports over the items judged."""
        try:
            await self.runtime.aclose()
        finally:
            if self._open is not None:
                await self._finish(*self._open)

    async def _finish(self, outcome: RunOutcome, log: ResultsLog, errors: ErrorCount, folder: OutputFolder) -> None:
        self._open = None
        record, failed = outcome.record, True
        try:
            log.close()
            record.planned = record.input_items = self.judged
            record.manifest["counts"].update(input_items=self.judged, selected=self.judged, planned=self.judged)
            await write_outputs(self.runtime, outcome, errors)
            failed = False
        except (OutputError, OSError) as exc:
            self._say(str(exc))
        finally:
            try:
                record.finish(outcome, failed)
                if not failed:
                    mark_latest(outcome.out_dir, outcome.summary)
            finally:
                folder.release()
