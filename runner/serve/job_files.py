"""The files of `runner serve`'s jobs under reports/.runner-serve/: their inputs, which
server runs which job, what a killed job's run had written (to take up again), and a run's
results read back as they are written."""

from __future__ import annotations

import fcntl
import hashlib
import itertools
import json
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from runner.fileio import dumps, open_own
from runner.llm.calls.record import item_of
from runner.runs.folders import CALLS_FILE
from runner.runs.lock import OutputFolder, held
from runner.runs.results_file import answered_items, vote_lines
from runner.serve.http import ApiError
from runner.stores.kept import ANSWERED_FIELD, VOTES_FIELD, valid_votes, without_reads
from runner.stores.result_store import ResultStore

FOLDER = ".runner-serve"
OWNER = re.compile(r"[0-9]+-[0-9a-f]{8}")        # a server's id: its process and a random part
Line = TypeVar("Line", str, bytes)
CALLS_BATCH = 512        # lines of calls.jsonl (or results.jsonl) handled at once


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
        for lines in _batches(_whole_lines(run / "results.jsonl"), CALLS_BATCH):
            results = [result for result in map(_parsed, lines)
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
            for lines in _batches(_whole_lines(calls), CALLS_BATCH):
                done = self._store.get_many("job", "item", {str(item_of(line)) for line in lines})
                kept.writelines(line for line in lines if str(item_of(line)) in done)

    def get(self, key: str) -> dict[str, Any] | None:
        found = self._store.get("job", "resume", key)
        return found.result if found is not None else None

    def kept_calls(self) -> Iterator[list[bytes]]:
        """The calls set aside, CALLS_BATCH lines at a time."""
        return _batches(_whole_lines(self.calls), CALLS_BATCH)

    def remove(self) -> None:
        self._store.close()
        for suffix in ("", "-wal", "-shm"):
            Path(str(self.path) + suffix).unlink(missing_ok=True)
        self.calls.unlink(missing_ok=True)


def _parsed(line: str | bytes) -> Any:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def _batches(lines: Iterable[Line], size: int) -> Iterator[list[Line]]:
    source = iter(lines)
    while batch := list(itertools.islice(source, size)):
        yield batch


def _whole_lines(path: Path) -> Iterator[bytes]:
    """The complete lines of a file being appended to, up to the first without its newline (being
    written, or cut by a kill: read on, its tail would pass for a line)."""
    try:
        with path.open("rb") as handle:
            for line in handle:
                if not line.endswith(b"\n"):
                    return
                yield line
    except FileNotFoundError:
        return


async def results_lines(path: Path | None) -> AsyncIterator[bytes]:
    """A run's results.jsonl as it stands when opened (its end replaces it), whole lines, CALLS_BATCH at a time."""
    for lines in _batches(_whole_lines(path), CALLS_BATCH) if path is not None else ():
        yield b"".join(lines)
