"""results.jsonl: appended as results finish (so in finishing order), read back without
holding it (a lazy, re-iterable view), and rewritten into input order when the run ends, in
bounded memory: an external merge sort by `index` (a file already in order is left as it is)."""

from __future__ import annotations

import heapq
import itertools
import json
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

from runner.fileio import AppendFile, atomic_write_lines, decode, dumps, parse_json, read_json_lines, utf8
from runner.llm.calls.file import read_calls
from runner.runs.folders import ANSWERED_FILE, CALLS_FILE, RESULTS, VOTES_FILE, checked_result, iter_results
from runner.stores.kept import ANSWERED_FIELD, VOTES_FIELD, valid_votes, without_reads

RUN_LINES = 20_000                  # at most this many lines sorted in memory at once when a file needs reordering,
RUN_CHARS = 8 << 20                 # and at most this much text (results with long fields are long lines)
_LEADING_INDEX = re.compile(r'\{"index": (-?\d+)[,}]')


class ResultsLog(AppendFile):
    """results.jsonl, each result appended as one line as it finishes; beside it answered.jsonl,
    the index of each item a model's answer made (kept.ANSWERED_FIELD, for `answered_items`),
    and votes.jsonl, each item's jury votes (kept.VOTES_FIELD, for `vote_lines`): what a run reusing
    this one's results reads."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        for name in (ANSWERED_FILE, VOTES_FILE):
            (path.parent / name).unlink(missing_ok=True)       # an earlier run's, in this folder
        self._notes: dict[str, AppendFile] = {}                 # each made at its first line

    def append(self, result: dict[str, Any], answered: bool = False) -> None:
        """Write one result (without the notes it carries: a reused model's answer, its votes)."""
        votes, index = result.get(VOTES_FIELD), result.get("index")
        if votes and isinstance(index, int):          # first: a kill between the two leaves no result without them
            self._note(VOTES_FILE, dumps({"index": index, "votes": votes}) + "\n")
        self.write(utf8(dumps(without_reads(result) if ANSWERED_FIELD in result or VOTES_FIELD in result
                              else result) + "\n"))
        if answered and isinstance(index, int):
            self._note(ANSWERED_FILE, f"{index}\n")

    def _note(self, name: str, line: str) -> None:
        if name not in self._notes:
            self._notes[name] = AppendFile(self.path.parent / name)
        self._notes[name].write(utf8(line))

    def close(self) -> None:
        super().close()
        for notes in self._notes.values():
            notes.close()


def answered_items(folder: Path) -> set[int]:
    """The items of the run in `folder` whose result a model's answer made: its answered.jsonl
    (whole lines), or without one, those a call of its calls.jsonl answered."""
    path = folder / ANSWERED_FILE
    if not path.is_file():
        return {call["item"] for call in read_calls(folder / CALLS_FILE)
                if not call.get("error") and isinstance(call.get("item"), int)}
    return {int(line) for line in whole_lines(path) if line.strip().isdigit()}


def vote_lines(folder: Path) -> Iterator[str]:
    """The whole, readable lines of the votes.jsonl in `folder` (none for a run folder written before
    it existed, or one whose items met no jury), each an object with an `index`; a damaged line is passed over."""
    for raw in whole_lines(folder / VOTES_FILE):
        try:        # the text as decoded is what is parsed, here and by whoever reads it on
            text = raw.decode("utf-8")
        except ValueError:
            continue
        entry = parsed_line(text)
        if isinstance(entry, dict) and isinstance(entry.get("index"), int):
            yield text


def whole_lines(path: Path) -> Iterator[bytes]:
    """The complete lines of a file being appended to, up to the first without its newline (being
    written, or cut by a kill: read on, its tail would pass for a line); none when it is missing."""
    try:
        with path.open("rb") as handle:
            for line in handle:
                if not line.endswith(b"\n"):
                    return
                yield line
    except FileNotFoundError:
        return


def parsed_line(line: str | bytes) -> Any:
    """One JSON line's value (None when it is not JSON)."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def votes_by_index(folder: Path, spill_dir: Path) -> Iterator[tuple[int, list[list[Any]]]]:
    """Each item's votes from the run in `folder` (`vote_lines`), in index order, in bounded memory."""
    lines = vote_lines(folder) if in_order(vote_lines(folder)) else sorted_lines(vote_lines(folder), spill_dir)
    for line in lines:
        entry = json.loads(line)
        yield entry["index"], valid_votes(entry.get("votes"))


def line_index(line: str) -> int:
    """The `index` of one results line (read from its start when it is first, as runner writes it)."""
    match = _LEADING_INDEX.match(line)
    if match:
        return int(match.group(1))
    value = parsed_line(line)       # None when not a result: the readers that check lines say so, located
    index = value.get("index", 0) if isinstance(value, dict) else 0
    return index if isinstance(index, int) else 0


def result_lines(path: Path) -> Iterator[str]:
    """The non-blank lines of a results file, each ending in a newline (none when it is missing);
    a line that is not UTF-8 (a damaged file) is an InputError naming it, never rewritten."""
    try:
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                if raw.strip():
                    line = decode(raw, str(path), number)
                    yield line if line.endswith("\n") else line + "\n"
    except FileNotFoundError:
        return


class ResultsView(Sequence[dict[str, Any]]):
    """The results of a results.jsonl, parsed one at a time on each pass (only the count is
    kept): a list to read, each `len`, index or slice a pass over the file."""

    def __init__(self, path: Path, strict: bool = False):
        self.path = path
        self.strict = strict          # a line that is not JSON is an InputError (else skipped: a crash cut it)
        self._length: int | None = None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self.strict:          # what a command reads: every line a result, or a located message
            for number, value in read_json_lines(self.path):
                yield checked_result(value, self.path, number)
            return
        try:
            handle = self.path.open("rb")
        except FileNotFoundError:
            return
        with handle:
            for raw in handle:
                try:
                    value = json.loads(raw.decode("utf-8"))
                except (ValueError, RecursionError):        # a blank line, and UnicodeDecodeError, included
                    continue
                if isinstance(value, dict):
                    yield value

    def __len__(self) -> int:
        if self._length is None:
            self._length = sum(1 for _ in self)
        return self._length

    @overload
    def __getitem__(self, position: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, position: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, position: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(position, slice):
            wanted = range(*position.indices(len(self)))
            return [r for n, r in enumerate(self) if n in wanted]
        if position < 0:
            position += len(self)
        found = next(itertools.islice(self, position, None), None) if position >= 0 else None
        if found is None:
            raise IndexError("results index out of range")
        return found

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, ResultsView)):
            return list(self) == list(other)
        return NotImplemented      # compared by content, like a list (so, like it, unhashable)

    def __bool__(self) -> bool:
        return any(True for _ in result_lines(self.path))

    def __repr__(self) -> str:
        return f"ResultsView({str(self.path)!r})"


def in_order(lines: Iterable[str]) -> bool:
    return all(a <= b for a, b in itertools.pairwise(map(line_index, lines)))


def sorted_lines(lines: Iterable[str], spill_dir: Path) -> Iterator[str]:
    """The lines by index, holding at most RUN_LINES of them (RUN_CHARS of text) at once."""
    with ExitStack() as stack:
        runs: list[Iterator[tuple[int, int, str]]] = []
        chunk: list[tuple[int, int, str]] = []

        def spill() -> None:
            chunk.sort()
            handle = stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8", dir=spill_dir))
            handle.writelines(line for _, _, line in chunk)
            handle.seek(0)
            runs.append((line_index(line), position, line) for position, line in enumerate(handle))
            chunk.clear()

        chars = 0
        for position, line in enumerate(lines):
            chunk.append((line_index(line), position, line))
            chars += len(line)
            if len(chunk) >= RUN_LINES or chars >= RUN_CHARS:
                spill()
                chars = 0
        if not runs:
            chunk.sort()
            yield from (line for _, _, line in chunk)
            return
        if chunk:
            spill()
        for _, _, line in heapq.merge(*runs):
            yield line


def rewrite_in_order(path: Path) -> None:
    """Rewrite results.jsonl in input (`index`) order, atomically, in bounded memory."""
    if not path.is_file() or in_order(result_lines(path)):
        return
    atomic_write_lines(path, sorted_lines(result_lines(path), path.parent))


@dataclass
class Taken:
    """What a `--failed-from` rerun took from its parent: the errors of those results, by message,
    with the index of each message's first item, and how many a model's answer made."""

    errors: Counter[str] = field(default_factory=Counter)
    first: dict[str, int] = field(default_factory=dict)
    answered: int = 0


def merge_parent(path: Path, parent: Path, on_votes: Callable[[list[list[Any]]], None]) -> Taken:
    """A `--failed-from` rerun made complete: the parent's results for the items not redone
    merged into its results file, those a model's answer made added to its answered.jsonl, and
    their juries' votes added to its votes.jsonl and handed to `on_votes` (both files read in
    index order, in bounded memory)."""
    taken = Taken()
    theirs = result_lines(parent) if in_order(result_lines(parent)) else sorted_lines(result_lines(parent), path.parent)
    made = answered_items(parent.parent)
    answered: set[int] = set()
    voted = votes_by_index(parent.parent, path.parent)
    pending = next(voted, None)
    kept_votes: list[AppendFile] = []          # the rerun's votes.jsonl, added to at the first vote taken

    def merged() -> Iterator[str]:
        nonlocal pending
        last, mine, voted_at = None, list[str](), None      # this run's lines at the index: they win
        keyed = heapq.merge(((line_index(line), 0, line) for line in result_lines(path)),
                            ((line_index(line), 1, line) for line in theirs))
        for index, side, line in keyed:
            if index != last:
                last, mine = index, []
            if side == 0:
                mine.append(line)
                yield line
                continue
            if mine:            # redone here (of two items an output numbered alike, only the one redone)
                keys, theirs_key = {_key_of(own) for own in mine}, _key_of(line)
                if theirs_key is None or None in keys or theirs_key in keys:
                    continue
            if voted_at != index:           # an index's kept votes, once
                voted_at = index
                while pending is not None and pending[0] < index:
                    pending = next(voted, None)
                if pending is not None and pending[0] == index and pending[1]:
                    on_votes(pending[1])
                    if not kept_votes:
                        kept_votes.append(AppendFile(path.parent / VOTES_FILE, keep=True))     # after its own
                    kept_votes[0].write(utf8(dumps({"index": index, "votes": pending[1]}) + "\n"))
            error = _error_of(line)
            if error:
                taken.errors[error] += 1
                taken.first.setdefault(error, index)
            elif index in made:
                answered.add(index)
            yield line

    try:
        atomic_write_lines(path, merged())
    finally:
        for votes in kept_votes:
            votes.close()
    if answered:
        mine = answered_items(path.parent) | answered
        atomic_write_lines(path.parent / ANSWERED_FILE, (f"{index}\n" for index in sorted(mine)))
    taken.answered = len(answered)
    return taken


def _key_of(line: str) -> str | None:
    """A results line's `item_key` (None: it has none, or is not a result)."""
    key = _field_of(line, "item_key")
    return key if isinstance(key, str) else None


def _error_of(line: str) -> str | None:
    error = _field_of(line, "error")
    return " ".join(str(error).split()) if error else None


def _field_of(line: str, name: str) -> Any:
    value = parsed_line(line)
    return value.get(name) if isinstance(value, dict) else None


def results_in_order(folder: Path) -> Iterator[dict[str, Any]]:
    """A run's results in index order, one at a time (a killed run's file sorted first), each line checked."""
    path = folder / RESULTS
    if in_order(result_lines(path)):
        yield from iter_results(folder)
        return
    for _ in iter_results(folder):      # every line checked where it stands (a message names its line)
        pass
    for number, line in enumerate(sorted_lines(result_lines(path), folder), 1):
        yield checked_result(parse_json(line, str(path), number), path, number)
