"""Structured output: the `response_format` a request with an output schema carries, and per
endpoint which format the server accepts.

`auto` starts with `json_schema`; a server that refuses it (`rejects_format`) gets `json_object`
with the schema, then no format. The choice is kept per endpoint and schema shape (one schema a
server cannot convert says nothing of the others) for the run and, for LEARNED_DAYS, in the
cache folder; said once on stderr. A file that is not what runner writes is ignored, with one warning."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from runner.errors import InputError
from runner.fileio import OutputError, atomic_write, read_json
from runner.llm.client.spec import ModelSpec
from runner.llm.client.transport import TransportError
from runner.redact import redact

LADDER = ("json_schema", "json_object", "none")
FILE = "structured_output.json"
LEARNED_DAYS = 7               # a server may be upgraded: try the better format again after this
MAX_STATE_BYTES = 1 << 20
# What a server's refusal of a response format names, as whole words ("information" or
# "formatting" are not a format), and the words that say it is refused.
FORMAT_WORDS = re.compile(r"\b(?:response_format|json_schema|json_object|json[ _-]schema|grammar)\b", re.IGNORECASE)
REFUSAL_WORDS = re.compile(r"validation|input should be|invalid|unsupported|not supported|must be|not allowed|"
                           r"unknown|unrecognized|failed to (?:parse|convert)|conversion failed|cannot|expected",
                           re.IGNORECASE)
VALIDATION_WORDS = re.compile(r"validation error|input should be|unsupported|not supported|must be", re.IGNORECASE)
NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
PYDANTIC_MSG = re.compile(r"""'msg': (?:"([^"]+)"|'([^']+)')""")


def brief(error: TransportError) -> str:
    """The gist of a refusal: pydantic's `msg` (llama-cpp-python), else its first line."""
    found = PYDANTIC_MSG.search(error.body)
    if found:
        return f"HTTP {error.status}: {found.group(1) or found.group(2)}"
    return error.message.splitlines()[0][:200] if error.message else "refused"


def response_format(mode: str, schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """The `response_format` a request in `mode` carries for `schema` (None: none)."""
    if schema is None or mode == "none":
        return None
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    name = NAME_CHARS.sub("_", str(schema.get("title") or "answer"))[:64] or "answer"
    # strict false: strict mode needs every property required and no extra ones, which
    # most answer schemas are not; servers still constrain the output to the schema.
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": False}}


def rejects_format(error: TransportError) -> bool:
    """The server refused the request's response format (not a transient fault): a 400/422, or a
    500 saying the request failed validation (llama-cpp-python's), whose text names the format
    and says it is refused ("information" or "invalid ... formatting" alone do not)."""
    text = error.body or error.message
    if error.status in (400, 422):
        return bool(FORMAT_WORDS.search(text) and REFUSAL_WORDS.search(text))
    if error.status == 500:
        return bool(FORMAT_WORDS.search(text) and VALIDATION_WORDS.search(text))
    return False


def schema_shape(schema: dict[str, Any] | None) -> str:
    """A short hash of an answer schema: what a server could not convert is this shape."""
    text = json.dumps(schema, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class FormatChoices:
    """Which format each endpoint and schema shape gets, learned by falling back, kept in
    the cache folder."""

    def __init__(self, directory: Path):
        self.file = directory / FILE
        self._warned = False

    @functools.cached_property
    def _learned(self) -> dict[str, dict[str, Any]]:
        return self._read()

    def _read(self) -> dict[str, dict[str, Any]]:
        """The file's unexpired choices; {} (and one warning) when it is not runner's."""
        if not self.file.exists():
            return {}
        try:
            data = read_json(self.file, MAX_STATE_BYTES)
        except InputError as exc:
            return self._ignore(str(exc))
        if not isinstance(data, dict):
            return self._ignore(f"{self.file}: not a JSON object")
        now = time.time()
        return {key: entry for key, entry in data.items()
                if isinstance(entry, dict) and entry.get("mode") in LADDER
                and isinstance(entry.get("until"), (int, float)) and entry["until"] > now}

    def _ignore(self, reason: str) -> dict[str, dict[str, Any]]:
        if not self._warned:
            self._warned = True
            sys.stderr.write(f"runner: ignoring {reason}; structured output formats are learned again\n")
        return {}

    @staticmethod
    def key(spec: ModelSpec, schema: dict[str, Any] | None = None) -> str:
        """Endpoint (without credentials: this goes to disk), model and schema shape."""
        return f"{redact(spec.endpoint)} {spec.model} {schema_shape(schema)}"

    def first(self, spec: ModelSpec, schema: dict[str, Any] | None) -> str:
        return spec.structured_output if spec.structured_output != "auto" else self.settled(spec, LADDER[0], schema)

    def settled(self, spec: ModelSpec, mode: str, schema: dict[str, Any] | None) -> str:
        """`mode`, or the format learned for the endpoint and schema since it was chosen."""
        learned = self._learned
        if spec.structured_output != "auto" or not learned:
            return mode
        entry = learned.get(self.key(spec, schema))
        found = entry["mode"] if entry else LADDER[0]
        return found if LADDER.index(found) > LADDER.index(mode) else mode

    def fall_back(self, spec: ModelSpec, rejected: str, error: TransportError,
                  schema: dict[str, Any] | None) -> str | None:
        """After `error` on a request in format `rejected`: the next format when the server refused
        that `response_format` (never retried), else None; raises the refusal for a fixed setting."""
        if response_format(rejected, schema) is None or not rejects_format(error):
            return None
        if spec.structured_output != "auto":
            raise TransportError(error.kind, f"{brief(error)} (the server rejects response_format {rejected}: set "
                                             f"models.{spec.name}.structured_output to auto or another mode)",
                                 error.status)
        learned = self._learned
        key = self.key(spec, schema)
        following = LADDER[LADDER.index(rejected) + 1]
        if LADDER.index(learned.get(key, {}).get("mode", LADDER[0])) < LADDER.index(following):
            learned[key] = {"mode": following, "until": time.time() + LEARNED_DAYS * 86400}
            self._save()
            sys.stderr.write(redact(f"runner: {spec.endpoint} ({spec.model}) rejects response_format {rejected} "
                                    f"({brief(error)}); using {following} for it and this answer schema for "
                                    f"{LEARNED_DAYS} days (set models.{spec.name}.structured_output to choose)\n"))
        return following

    def _save(self) -> None:
        """Merge this choice into the file under a lock, then replace it atomically (two runs learning
        at once keep both). A failure is let go: the file is a hint for the next run."""
        with contextlib.suppress(OSError, OutputError):
            self.file.parent.mkdir(parents=True, exist_ok=True)
            with open(self.file.with_name(FILE + ".lock"), "a") as lock:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)     # released when the lock file is closed
                merged = self._learned = {**self._read(), **self._learned}
                atomic_write(self.file, json.dumps(merged, indent=1, sort_keys=True))

