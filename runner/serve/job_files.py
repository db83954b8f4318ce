"""What `runner serve` writes on disk. /judge's run folder: what a served pipeline variant's
runtime judges is a run like any other, in reports/<pipeline>/judge-<pipeline hash>/<start time>/
from its first item (run.json of kind `serve`, calls.jsonl, results.jsonl), ended with its summary
and reports when the variant closes; a result answered from the store is not in it. And its jobs'
files under reports/.runner-serve/: their inputs, which server runs which job, what a killed job's
run had written (to take up again), and a run's results read back as they are written."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import os
import re
import secrets
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from runner.api import write_outputs
from runner.engine.context import Runtime
from runner.errors import RunnerError
from runner.fileio import OutputError, dumps, open_own
from runner.inputs import ItemStream
from runner.llm.calls.record import item_of
from runner.outputs.summary import ErrorCount
from runner.redact import redact
from runner.runs.folders import CALLS_FILE, RESULTS, mark_latest, new_run_dir
from runner.runs.lock import OutputFolder, held
from runner.runs.manifest import model_entries
from runner.runs.record import RunOutcome, RunRecord
from runner.runs.request import ItemSource
from runner.runs.results_file import ResultsLog, answered_items, parsed_line, vote_lines, whole_lines
from runner.serve.http import ApiError
from runner.stores.kept import ANSWERED_FIELD, VOTES_FIELD, valid_votes, without_reads
from runner.stores.result_store import ResultStore

FOLDER = ".runner-serve"
OWNER = re.compile(r"[0-9]+-[0-9a-f]{8}")        # a server's id: its process and a random part
Line = TypeVar("Line", str, bytes)
CALLS_BATCH = 512        # lines of calls.jsonl (or results.jsonl) handled at once


def say(message: str) -> None:
    """A line in the server's log, credentials redacted."""
    sys.stderr.write(redact(f"runner serve: {message}\n"))


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
            say(f"/judge of {pipeline.name} records no run folder: {exc}")
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
            say(f"/judge's run {outcome.out_dir} stops recording: {exc}")
            try:
                with contextlib.suppress(OSError, RunnerError):
                    log.close()
                with contextlib.suppress(OSError, RunnerError):
                    outcome.record.finish(outcome, True)        # run.json says it failed, not running
            finally:
                folder.release()
            return
        self.judged += 1

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
            say(str(exc))
        finally:
            try:
                record.finish(outcome, failed)
                if not failed:
                    mark_latest(outcome.out_dir, outcome.summary)
            finally:
                folder.release()


def job_folder(root: Path) -> Path:
    return root / "reports" / FOLDER


class InputWriter:
    """A job's input as it arrives (JSON lines, or an upload byte for byte, read by the adapter
    its `suffix` says: jobs.input_format), then kept under its content hash: jobs over the same
    input share a run group, as runs of one file do."""

    def __init__(self, root: Path, suffix: str = ".jsonl"):
        self.folder = job_folder(root) / "inputs"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.suffix = suffix
        handle, name = tempfile.mkstemp(dir=self.folder, prefix=".upload-", suffix=suffix)
        self._file = os.fdopen(handle, "wb")
        self._temp = Path(name)
        self._digest = hashlib.sha256()

    def write_bytes(self, data: bytes) -> None:
        self._file.write(data)
        self._digest.update(data)

    def records_of(self, values: Iterable[Any]) -> None:
        for value in values:
            self.write_bytes((dumps(value) + "\n").encode("utf-8", "surrogatepass"))

    def close(self) -> Path:
        """The input's file (its name: the content's hash)."""
        self._file.close()
        if self._temp.stat().st_size == 0:
            self.discard()
            raise ApiError(400, "no items: the job's input is empty")
        final = self.folder / f"{self._digest.hexdigest()[:16]}{self.suffix}"
        os.replace(self._temp, final)
        return final

    def discard(self) -> None:
        self._file.close()
        self._temp.unlink(missing_ok=True)


class Claims:
    """Which server runs which job (`owner`), for servers sharing one project. Each holds the lock of
    its folder under reports/.runner-serve/servers/ while it lives (runner/runs/lock.py: free once
    it dies), and at its start takes up only the jobs whose server is gone, under one lock."""

    def __init__(self, root: Path):
        self.folder = job_folder(root) / "servers"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.id = f"{os.getpid()}-{secrets.token_hex(4)}"
        with self.taking():
            self._own = OutputFolder(self.folder / self.id).claim()

    @contextmanager
    def taking(self) -> Iterator[None]:
        """Held while a server looks at the jobs to take up (and the folders of servers gone are removed)."""
        fd = open_own(self.folder / ".take.lock", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            for server in self.folder.iterdir():
                if server.is_dir() and not held(server):         # a server gone
                    shutil.rmtree(server, ignore_errors=True)
            yield
        finally:
            os.close(fd)

    def taken_elsewhere(self, owner: str | None) -> bool:
        """Whether another server, still running, holds the job."""
        if not owner or owner == self.id or not OWNER.fullmatch(owner):
            return False
        return held(self.folder / owner)

    def release(self) -> None:
        """Let the jobs go (a server started later takes up those left queued or running)."""
        self._own.release()
        shutil.rmtree(self.folder / self.id, ignore_errors=True)


class ResumeIndex:
    """What a killed or stopped job's run wrote, for the run taking it up in its folder: the
    results by item key in a small database (never held in memory), each noted when a model's
    answer made it (kept.ANSWERED_FIELD) and with its juries' votes (votes.jsonl), and those
    items' calls set aside (`kept_calls`: the new run writes them back into its fresh
    calls.jsonl); the other items run again."""

    def __init__(self, path: Path):
        self.path = path
        self.calls = path.with_suffix(".calls.jsonl")
        self._store = ResultStore.sqlite(path)

    @classmethod
    def of(cls, path: Path, run: Path) -> ResumeIndex:
        index = cls(path)
        answered = answered_items(run)      # noted on the results, as their votes: the run taking them up counts them
        for texts in _batches(vote_lines(run), CALLS_BATCH):      # by index, in the index's own database
            entries = [json.loads(text) for text in texts]
            index._store.put_many("job", "votes", [(str(entry["index"]), {"votes": valid_votes(entry.get("votes"))})
                                                   for entry in entries])
        for lines in _batches(whole_lines(run / "results.jsonl"), CALLS_BATCH):
            results = [result for result in map(parsed_line, lines)
                       if isinstance(result, dict) and isinstance(result.get("item_key"), str)]
            numbers = [str(result["index"]) for result in results if isinstance(result.get("index"), int)]
            voted = index._store.get_many("job", "votes", numbers)
            kept = []
            for result in results:
                result, number = without_reads(result), result.get("index")     # a hand-written note is not one
                if number in answered:
                    result[ANSWERED_FIELD] = True
                votes = voted[str(number)].result["votes"] if str(number) in voted else None
                if votes:
                    result[VOTES_FIELD] = votes
                kept.append((result["item_key"], result))
            index._store.put_many("job", "resume", kept)
            index._store.put_many("job", "item", [(number, {}) for number in numbers])
        index._set_calls_aside(run / CALLS_FILE)
        return index

    def _set_calls_aside(self, calls: Path) -> None:
        with self.calls.open("wb") as kept:
            for lines in _batches(whole_lines(calls), CALLS_BATCH):
                done = self._store.get_many("job", "item", {str(item_of(line)) for line in lines})
                kept.writelines(line for line in lines if str(item_of(line)) in done)

    def get(self, key: str) -> dict[str, Any] | None:
        found = self._store.get("job", "resume", key)
        return found.result if found is not None else None

    def kept_calls(self) -> Iterator[list[bytes]]:
        """The calls set aside, CALLS_BATCH lines at a time."""
        return _batches(whole_lines(self.calls), CALLS_BATCH)

    def remove(self) -> None:
        self._store.close()
        for suffix in ("", "-wal", "-shm"):
            Path(str(self.path) + suffix).unlink(missing_ok=True)
        self.calls.unlink(missing_ok=True)


def _batches(lines: Iterable[Line], size: int) -> Iterator[list[Line]]:
    source = iter(lines)
    while batch := list(itertools.islice(source, size)):
        yield batch


async def results_lines(path: Path | None) -> AsyncIterator[bytes]:
    """A run's results.jsonl as it stands when opened (its end replaces it), whole lines, CALLS_BATCH at a time."""
    for lines in _batches(whole_lines(path), CALLS_BATCH) if path is not None else ():
        yield b"".join(lines)
