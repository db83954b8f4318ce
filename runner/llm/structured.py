"""Structured output: the `response_format` a request with an output schema carries, and
per endpoint which format the server accepts.

`auto` starts with `json_schema` (OpenAI, LM Studio, vLLM, llama-server); a server that
rejects it (400/422, or a 500 saying the request failed validation, as llama-cpp-python
does) gets `json_object` with the schema, then no format. The choice is remembered for the
run and in the cache folder, so the next run starts right, and said once on stderr."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from runner.llm.spec import ModelSpec
from runner.llm.transport import TransportError

LADDER = ("json_schema", "json_object", "none")
FILE = "structured_output.json"
# What a server's refusal of a response format talks about.
FORMAT_WORDS = re.compile(r"response_format|json_schema|json_object|schema|grammar|format", re.IGNORECASE)
VALIDATION_WORDS = re.compile(r"validation|input should be|invalid|unsupported|not supported", re.IGNORECASE)
NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
PYDANTIC_MSG = re.compile(r"""'msg': (?:"([^"]+)"|'([^']+)')""")


def brief(error: TransportError) -> str:
    """The gist of a refusal: pydantic's `msg` (llama-cpp-python), else its first line."""
    found = PYDANTIC_MSG.search(error.body)
    if found:
        return f"HTTP {error.status}: {found.group(1) or found.group(2)}"
    return error.message.splitlines()[0][:200] if error.message else "refused"


def response_format(mode: str, schema: dict[str, Any] | None) -> dict[str, Any] | None:
    if schema is None or mode == "none":
        return None
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    name = NAME_CHARS.sub("_", str(schema.get("title") or "answer"))[:64] or "answer"
    # strict false: strict mode needs every property required and no extra ones, which
    # most answer schemas are not; servers still constrain the output to the schema.
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": False}}


def rejects_format(error: TransportError) -> bool:
    """The server refused the request's response format (not a transient fault)."""
    if error.status in (400, 422):
        return bool(FORMAT_WORDS.search(error.body))
    if error.status == 500:
        return bool(FORMAT_WORDS.search(error.body) and VALIDATION_WORDS.search(error.body))
    return False


class FormatChoices:
    """Which format each endpoint gets, learned by falling back, kept in the cache folder."""

    def __init__(self, directory: Path):
        self.file = directory / FILE
        self._learned: dict[str, str] | None = None

    def _load(self) -> dict[str, str]:
        if self._learned is None:
            try:
                data = json.loads(self.file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = {}
            self._learned = {k: v for k, v in data.items() if v in LADDER} if isinstance(data, dict) else {}
        return self._learned

    @staticmethod
    def key(spec: ModelSpec) -> str:
        return f"{spec.endpoint} {spec.model}"

    def first(self, spec: ModelSpec) -> str:
        return spec.structured_output if spec.structured_output != "auto" else self.settled(spec, LADDER[0])

    def settled(self, spec: ModelSpec, mode: str) -> str:
        """`mode`, or the format learned for the endpoint since it was chosen."""
        if spec.structured_output != "auto":
            return mode
        learned = self._load().get(self.key(spec), LADDER[0])
        return learned if LADDER.index(learned) > LADDER.index(mode) else mode

    def fall_back(self, spec: ModelSpec, rejected: str, error: TransportError) -> str | None:
        """The next format to try after `rejected`, or None when the model's setting is fixed."""
        if spec.structured_output != "auto" or rejected == LADDER[-1]:
            return None
        learned = self._load()
        key = self.key(spec)
        following = LADDER[LADDER.index(rejected) + 1]
        if LADDER.index(learned.get(key, LADDER[0])) < LADDER.index(following):
            learned[key] = following
            self._save()
            sys.stderr.write(f"runner: {spec.endpoint} ({spec.model}) rejects response_format {rejected} "
                             f"({brief(error)}); using {following} for it from now on "
                             f"(set models.{spec.name}.structured_output to choose)\n")
        return following

    def _save(self) -> None:
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.file.with_suffix(".tmp")
            temporary.write_text(json.dumps(self._learned, indent=1, sort_keys=True), encoding="utf-8")
            temporary.replace(self.file)
        except OSError:
            pass        # only a hint for the next run; this run remembers it in memory
