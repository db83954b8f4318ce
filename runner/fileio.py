"""Writing files so a reader never sees half of one, and reading the JSON files runner reads
back; and `now()`, the one timestamp the records runner writes carry (run.json's start, cache
entries, reviews, serve's jobs, a template's `now()`).

A failed write (disk full, quota, read-only folder) is an OutputError (exit 1), and what was
written stays whole. A file read has a size and a depth limit (MAX_DEPTH), every failure an
InputError naming the file and line, never a traceback; an escaped lone surrogate becomes
U+FFFD (runner/safetext.py), so what is read can be written again."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runner.errors import InputError, RunnerError
from runner.safetext import clean_value, dumps, utf8

__all__ = ["OutputError", "atomic_write", "dumps", "open_own", "utf8"]

# A file runner writes in its output folder is opened without following a symlink planted
# in its place (ELOOP): a link there never sends a write outside the folder.
NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)


def now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


class OutputError(RunnerError):
    """An output file could not be written."""

    exit_code = 1


def _umask() -> int:
    """The process umask, from /proc where it can be (setting it to read it changes it for every thread)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file."""
    atomic_write_lines(path, (text,))


def atomic_write_lines(path: Path, chunks: Iterable[str]) -> None:
    """atomic_write for text made piece by piece (a file of any size, never whole in memory)."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.fchmod(fd, 0o666 & ~_umask())          # mkstemp makes 0600; honour the umask like open() does
        with os.fdopen(fd, "wb") as handle:
            handle.writelines(utf8(chunk) for chunk in chunks)     # one safe encoding (runner/safetext.py)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise


def open_own(path: Path | str, flags: int = os.O_WRONLY | os.O_CREAT | os.O_TRUNC) -> int:
    """os.open of a file the run writes (mode 0666 less the umask), refusing a symlink in its place."""
    return os.open(path, flags | NO_FOLLOW, 0o666)


class AppendFile:
    """A file the run appends to in whole pieces (results.jsonl, calls.jsonl), emptied when opened
    (`keep`: added to); a piece that cannot be written whole is cut back off (OutputError naming the file)."""

    def __init__(self, path: Path, keep: bool = False) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd: int | None = open_own(path, os.O_WRONLY | os.O_CREAT | (os.O_APPEND if keep else os.O_TRUNC))
            self._size = os.fstat(self._fd).st_size         # bytes of whole pieces written so far
        except OSError as exc:
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None

    def write(self, data: bytes) -> None:
        if self._fd is None:
            return
        try:
            written = 0
            while written < len(data):
                written += os.write(self._fd, data[written:])
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
                os.lseek(self._fd, self._size, os.SEEK_SET)
            raise OutputError(f"cannot write {self.path}: {exc.strerror or exc}; it keeps what was written "
                              "before") from None
        self._size += len(data)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

MAX_DEPTH = 200
MAX_FILE_BYTES = 2 * 2**30           # a whole file read at once (summary, labels, a memo store)
MAX_LINE_BYTES = 256 * 2**20          # one line of a JSON lines file
# `"\ud83d"` escaped in JSON parses to a lone surrogate, which no UTF-8 output can hold.
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89abcdefABCDEF]")


class NotJson(InputError):
    """The text is not JSON at all (as opposed to JSON too deep or too big)."""


def too_deep(value: Any) -> bool:
    """Whether a parsed value nests past MAX_DEPTH levels (walked iteratively: no recursion to exhaust)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(current, dict):
            stack.extend((v, depth + 1) for v in current.values() if isinstance(v, (dict, list)))
        elif isinstance(current, list):
            stack.extend((v, depth + 1) for v in current if isinstance(v, (dict, list)))
    return False


# An integer literal past the digits Python reads (sys.get_int_max_str_digits(), against quadratic
# parsing): JSON, YAML and templates refuse it in these words.
TOO_MANY_DIGITS = f"a number of more than {sys.get_int_max_str_digits()} digits, past what runner reads"


class _NotData(Exception):
    """What JSON's grammar lets Python read but JSON data never holds (parse_json refuses it)."""


def _no_constant(name: str) -> Any:
    raise _NotData(f"{name} is not a JSON value (write a number, null or a string)")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):        # only then is the key looked for
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _NotData(f"the key {key[:80]!r} is given twice in one object (only one value would be read)")
            seen.add(key)
    return value


def parse_json(text: str, where: str, line: int | None = None, strict: bool = False) -> Any:
    """`text` parsed, or InputError at `where` (`where:line` for one line of a file). `strict`
    for data a person wrote (inputs, labels, requests, examples, schemas): NaN, Infinity and a
    key given twice in one object (which Python reads, silently keeping the last) are refused,
    as the csv adapter refuses them. Files runner wrote (run.json, caches) are read as written."""
    at = f"{where}:{line}" if line is not None else where
    try:
        value = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys) if strict \
            else json.loads(text)
    except _NotData as exc:
        raise InputError(f"{at}: {exc}") from None
    except json.JSONDecodeError as exc:
        position = f"{line}:{exc.colno}" if line is not None else f"{exc.lineno}:{exc.colno}"
        raise NotJson(f"{where}:{position}: not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise InputError(f"{at}: JSON nested too deeply (more than {MAX_DEPTH} levels)") from None
    except ValueError:          # an integer past Python's digit limit for reading one (against quadratic parsing)
        raise InputError(f"{at}: {TOO_MANY_DIGITS} (write it as a string)") from None
    # Only a text with that many brackets can nest that deep: most never pay for the walk.
    if text.count("[") + text.count("{") > MAX_DEPTH and too_deep(value):
        raise InputError(f"{at}: JSON nested too deeply (more than {MAX_DEPTH} levels)")
    return clean_value(value) if _ESCAPED_SURROGATE.search(text) else value


def decode(data: bytes, where: str, first_line: int = 1) -> str:
    """UTF-8 text (a leading BOM dropped), or an InputError naming the first bad byte's line and column."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        before = data[:exc.start]
        line = first_line + before.count(b"\n")
        column = exc.start - (before.rfind(b"\n") + 1) + 1
        raise InputError(f"{where}:{line}:{column}: not UTF-8 text (byte 0x{data[exc.start]:02x})") from None


def read_text(path: Path, limit: int = MAX_FILE_BYTES) -> str:
    """A whole UTF-8 file (a BOM dropped), with the size limit."""
    try:
        size = path.stat().st_size
        if size > limit:
            raise InputError(f"{path}: {size} bytes, more than the {limit} runner reads")
        return decode(path.read_bytes(), str(path))
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def read_json(path: Path, limit: int = MAX_FILE_BYTES, strict: bool = False) -> Any:
    return parse_json(read_text(path, limit), str(path), strict=strict)


def read_json_lines(path: Path, strict: bool = False) -> Iterator[tuple[int, Any]]:
    """(line number, value) of each non-blank line, read one line at a time (`strict`: parse_json's)."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    with handle:
        for number, raw in enumerate(iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b""), 1):
            if len(raw) > MAX_LINE_BYTES:
                raise InputError(f"{path}:{number}: a line of more than {MAX_LINE_BYTES} bytes")
            text = decode(raw, str(path), number)
            if text.strip():
                yield number, parse_json(text, str(path), number, strict)
