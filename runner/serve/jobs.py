"""Jobs: a request's items judged as a run on the server's event loop (started in a worker
thread: reading the input may take seconds), in a run folder under reports/ that `runner view`
lists (statuses: queued, running, succeeded, failed as `runner run` fails, cancelled).

A job's record is a JSON file in reports/.runner-serve/jobs/, written at each change of status.
A server killed mid-job, or stopped, takes it up at its next start in the same run folder,
keeping each result written (unless the pipeline hash changed: all judged again, `notes` say)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import secrets
import sys
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from runner.api import StartedRun
from runner.engine.health import run_failure
from runner.engine.progress import Counter
from runner.errors import InputError, RunnerError
from runner.fileio import atomic_write, dumps, now
from runner.inputs import iter_records
from runner.pipeline.model import Pipeline
from runner.redact import redact
from runner.runs.folders import is_run, mark_latest
from runner.runs.request import ItemSource
from runner.serve.http import ApiError
from runner.serve.job_files import Claims, ResumeIndex, job_folder, results_lines
from runner.serve.judging import Judging

T = TypeVar("T")

RUNNING_AT_ONCE = 2           # jobs that run at the same time; the others wait their turn
# done, errors, and where the others came from (resumed: written before a restart; memo: the memo store)
COUNTS = ("done", "errors", "resumed", "store", "memo", "judged")


@dataclass
class Job:
    id: str
    pipeline: str
    params: dict[str, Any]
    input: str                          # its input file, relative to the project folder
    input_name: str | None = None       # the uploaded file's name, as its items' errors say it
    status: str = "queued"
    created_at: str = field(default_factory=now)
    started_at: str | None = None
    ended_at: str | None = None
    run: str | None = None              # its run folder, relative to the project folder
    items: int | None = None            # items the run takes, known once it starts
    pipeline_hash: str | None = None
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    resumed: int = 0                    # times a restarted server took it up again
    error: str | None = None
    notes: list[str] = field(default_factory=list)     # what the server did that a reader should know
    owner: str | None = None            # the server that runs it (job_files.Claims)

    def view(self) -> dict[str, Any]:
        shown = asdict(self)
        shown["progress"] = round(self.counts["done"] / self.items, 4) if self.items else (
            1.0 if self.status == "succeeded" else 0.0)
        return shown


def _read_job(path: Path) -> Job:
    """A job record as a server wrote it; a hand-edited one whose params, counts, notes, items or
    input_name are not what the server writes is refused here (TypeError), not when its run starts."""
    job = Job(**json.loads(path.read_text(encoding="utf-8")))
    for name, kind in (("params", dict), ("counts", dict), ("notes", list)):
        if not isinstance(getattr(job, name), kind):
            raise TypeError(f"{name} is not a JSON {'object' if kind is dict else 'array'}")
    if not all(type(job.counts.get(name)) is int for name in COUNTS):
        raise TypeError(f"counts does not hold a whole number for each of {', '.join(COUNTS)}")
    if job.items is not None and type(job.items) is not int:
        raise TypeError("items is not a whole number")
    if job.input_name is not None and not isinstance(job.input_name, str):
        raise TypeError("input_name is not a string")
    return job


class JobProgress:
    """The run's progress as the job shows it: its items and its results so far."""

    def __init__(self, board: JobBoard, job: Job):
        self.board, self.job = board, job

    def start(self, total: int, counts: Counter) -> None:
        self.job.items = total
        self.board.save(self.job)

    def advance(self) -> None:
        self.job.counts["done"] += 1

    def stop(self) -> None:
        return None


class JobBoard:
    def __init__(self, root: Path, judging: Judging):
        self.root = root
        self.judging = judging
        self.folder = job_folder(root)
        self.jobs: dict[str, Job] = {}
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._running: dict[str, asyncio.Task[None]] = {}
        self._cancelled: set[str] = set()
        self._workers: list[asyncio.Task[None]] = []
        self.claims = Claims(root)              # this server's claim on the jobs it runs

    def relative(self, path: Path) -> str:
        return Path(path).resolve().relative_to(self.root).as_posix()

    def save(self, job: Job) -> None:
        atomic_write(self.folder / "jobs" / f"{job.id}.json", dumps(asdict(job)) + "\n")

    def get(self, job_id: str) -> Job:
        job = self.jobs.get(job_id)
        if job is None:
            raise ApiError(404, f"no job {job_id!r} on this server")
        return job

    def submit(self, pipeline: str, params: dict[str, Any], input_file: Path, pipeline_hash: str,
               input_name: str | None = None) -> Job:
        job_id = datetime.now(UTC).strftime("%Y%m%d%H%M%S-") + secrets.token_hex(4)
        job = Job(job_id, pipeline, params, self.relative(input_file), input_name, pipeline_hash=pipeline_hash,
                  owner=self.claims.id)
        self.jobs[job_id] = job
        self.save(job)
        self._queue.put_nowait(job_id)
        return job

    async def start(self) -> None:
        """Take up the jobs a stopped or killed server left queued or running, then run jobs."""
        (self.folder / "jobs").mkdir(parents=True, exist_ok=True)
        with self.claims.taking():
            for path in sorted((self.folder / "jobs").glob("*.json")):
                try:
                    job = _read_job(path)
                except (OSError, ValueError, TypeError) as exc:
                    sys.stderr.write(f"runner serve: {path}: not a job record ({exc}): left alone\n")
                    continue
                self.jobs[job.id] = job
                if job.status in ("queued", "running") and not self.claims.taken_elsewhere(job.owner):
                    if job.status == "running":
                        job.resumed += 1
                    job.status, job.owner = "queued", self.claims.id
                    self.save(job)
                    self._queue.put_nowait(job.id)
        self._workers = [asyncio.ensure_future(self._work()) for _ in range(RUNNING_AT_ONCE)]

    async def _work(self) -> None:
        while True:
            job = self.jobs[await self._queue.get()]
            if job.status != "queued":
                continue                # cancelled while it waited
            task = asyncio.ensure_future(self._run(job))
            self._running[job.id] = task
            try:
                await task
            except asyncio.CancelledError:
                worker = asyncio.current_task()
                if worker is not None and worker.cancelling():      # the server is stopping
                    await asyncio.gather(task, return_exceptions=True)     # the run writes what finished
                    raise
                # else the job was cancelled (DELETE): on to the next
            finally:
                self._running.pop(job.id, None)

    async def _run(self, job: Job) -> None:
        job.status, job.started_at, job.error = "running", job.started_at or now(), None
        self.save(job)
        resumed: ResumeIndex | None = None
        try:
            variant = await self.judging.variant(job.pipeline, job.params)
            judged_under, job.pipeline_hash = job.pipeline_hash, variant.hash
            counts = job.counts = dict.fromkeys(COUNTS, 0)
            more: dict[str, Any] = {}
            if job.run is not None and (self.root / job.run).is_dir():       # a run to take up again
                more = {"out_dir": self.root / job.run, "memo_dir": (self.root / job.run).parent}
                if judged_under in (None, variant.hash):
                    sidecar = self.folder / "jobs" / f"{job.id}.{self.claims.id}.resume.sqlite"     # this server's own
                    resumed = await _off_the_loop(functools.partial(ResumeIndex.of, sidecar, self.root / job.run),
                                                  lambda index: asyncio.to_thread(index.remove))
                else:           # results of another pipeline (a prompt, schema or model changed): judged again
                    note = (f"the pipeline changed since this job's results were judged (pipeline hash "
                            f"{judged_under} -> {variant.hash}): every item is judged again, none resumed")
                    job.notes.append(f"{now()} {note}")         # in the job's record and the server's log
                    self.save(job)
                    sys.stderr.write(f"runner serve: job {job.id}: {note}\n")
            source = ItemSource(self.root / job.input, input_format=input_format(variant.pipeline, Path(job.input)),
                                input_name=job.input_name or job.input)
            start = functools.partial(StartedRun.start, variant.pipeline.file, source, self.judging.options(**more),
                                      list(variant.overrides), role=self.judging.job_role(variant, resumed, counts))
            run = await _off_the_loop(start, StartedRun.discard)
            job.run = self.relative(run.outcome.out_dir)        # where the run writes, shown from its start
            outcome = await run.run(JobProgress(self, job))
            counts["errors"] = int(outcome.summary.get("errors") or 0)
            if more and is_run(outcome.out_dir):     # a run taken up again is written as --out: latest is it
                mark_latest(outcome.out_dir, outcome.summary)
            job.status, job.error = _outcome(outcome.summary)
        except asyncio.CancelledError:
            job.status = "cancelled" if job.id in self._cancelled else "queued"    # a stopping server resumes it later
            raise
        except RunnerError as exc:          # ApiError too
            job.status, job.error = "failed", redact(str(exc))
        except Exception as exc:  # a bug fails its job, never the server
            sys.stderr.write(redact("".join(traceback.format_exception(exc))))
            job.status, job.error = "failed", f"internal error: {type(exc).__name__} (see the server's log)"
        finally:
            if resumed is not None:
                resumed.remove()
            job.ended_at = now() if job.status != "queued" else None
            self.save(job)

    async def cancel(self, job_id: str) -> Job:
        """Stop a job, keeping what finished: a queued one never starts, a running one ends as an interrupted run."""
        job = self.get(job_id)
        if job.status not in ("queued", "running"):
            raise ApiError(409, f"job {job_id} is {job.status}: nothing to cancel")
        if self.claims.taken_elsewhere(job.owner):
            raise ApiError(409, f"job {job_id} runs on another server of this project: cancel it there")
        self._cancelled.add(job_id)
        task = self._running.get(job_id)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if job.status in ("queued", "running"):     # waiting, or cancelled before its run began: it never starts
            job.status, job.ended_at = "cancelled", now()
            self.save(job)
        return job

    def results(self, job_id: str) -> Any:
        """The job's results written so far, as JSON lines (streamed, whole lines only)."""
        job = self.get(job_id)
        return results_lines(self.root / job.run / "results.jsonl" if job.run else None)

    async def aclose(self) -> None:
        for worker in self._workers:
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers.clear()
        self.claims.release()


async def _off_the_loop(work: Callable[[], T], let_go: Callable[[T], Awaitable[Any]]) -> T:
    """`work` (reading a job's files, which may take seconds) in a worker thread, off the event loop;
    a job cancelled meanwhile waits for it to end, then lets its result go."""
    done = asyncio.ensure_future(asyncio.to_thread(work))
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        await _outlast(done)
        if not done.cancelled() and done.exception() is None:
            await _outlast(asyncio.ensure_future(let_go(done.result())))
        raise


async def _outlast(work: asyncio.Future[Any]) -> None:
    """Wait for `work` to end whatever cancels reach this task meanwhile (a second DELETE, the
    server stopping): a started run is always let go, never left holding its folder."""
    while not work.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait([work])


# An uploaded file kept as it came, for the adapter its name says; JSON lines (a JSON body, an
# upload named .jsonl or .ndjson or without a suffix); any other file (OWN_KIND: .tsv, .txt, .md)
# for the pipeline's own adapter, as `runner run --input` reads a file of any name.
UPLOADS = {".csv": "csv", ".json": "json", ".yaml": "yaml", ".yml": "yaml"}
JSON_LINES = (".jsonl", ".ndjson")
OWN_KIND = ".input"


def input_format(pipeline: Pipeline, path: Path) -> str | None:
    """The adapter reading a job's input, as `runner run` picks it: an uploaded CSV, JSON or YAML
    file by its name's; another file by the pipeline's (None); JSON lines by the pipeline's
    when it reads JSON, else by jsonl."""
    if path.suffix in UPLOADS:
        return UPLOADS[path.suffix]
    if path.suffix == OWN_KIND:
        return None
    return None if pipeline.adapter in ("json", "jsonl") else "jsonl"


def check_input(pipeline: Pipeline, path: Path) -> None:
    """ApiError(400) for an input `runner run` refuses before its first item: a CSV upload
    without a usable header or a column its `with.types` names, an invalid JSON or YAML upload;
    a row or line that cannot be read is that item's error when the job runs."""
    adapter = input_format(pipeline, path) or pipeline.adapter
    if adapter not in ("csv", "json", "yaml"):
        return
    options = pipeline.input.options if pipeline.adapter == adapter else {}
    try:
        records = iter_records(adapter, path, options)
    except InputError as exc:
        raise ApiError(400, str(exc).replace(str(path), f"the {adapter.upper()} upload")) from None
    getattr(records, "close", lambda: None)()


def _outcome(summary: dict[str, Any]) -> tuple[str, str | None]:
    """(status, error) of a job's run, failed as `runner run` fails it (run_failure: every item
    errored, or no model answered any call); the error names the run's most common one."""
    failure, total, errors = run_failure(summary), int(summary.get("total") or 0), int(summary.get("errors") or 0)
    if failure is None:
        return "succeeded", None
    groups = summary.get("error_groups")
    first = str(groups[0].get("error"))[:500] if isinstance(groups, list) and groups and isinstance(groups[0], dict) \
        else "see the run's results"
    return "failed", (f"every item errored ({errors} of {total}): " if total and errors >= total
                      else failure.removeprefix("run failed: ") + ": ") + first
