"""Batch files: the JSONL request lines we upload, the output and error lines we read back
(each turned into a completion or a classified failure), and the batch price."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Awaitable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from runner.llm.client.http import ERROR_TEXT, wire_model
from runner.llm.client.prices import batch_price_of
from runner.llm.client.spec import ModelSpec
from runner.llm.client.transport import Completion, TransportError, completion_of

CHAT_URL = "/v1/chat/completions"
MAX_FILE_BYTES = 190 * 1024 * 1024       # the provider takes 200 MB per file; headers and rounding aside
# Line error codes that name a fault of the request itself: the same line would fail again.
CLIENT_CODES = ("invalid", "not_found", "unsupported", "too_long", "context_length", "cancelled")
# What may follow the model asked for in an answer's `model`: a dated or numbered snapshot
# (gpt-4o-mini-2024-07-18, claude-x@20240620) or a tag (llama3:latest).
_SNAPSHOT = re.compile(r"(-|@)\d|:")


@dataclass
class RequestLine:
    custom_id: str
    body: dict[str, Any]

    def encoded(self) -> bytes:
        line = {"custom_id": self.custom_id, "method": "POST", "url": CHAT_URL, "body": self.body}
        return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def chunks(lines: list[RequestLine], max_requests: int) -> Iterator[tuple[list[str], bytes]]:
    """The lines as files within the limits: (custom ids, file bytes) each."""
    ids: list[str] = []
    parts: list[bytes] = []
    size = 0
    for line in lines:
        data = line.encoded()
        if ids and (len(ids) >= max_requests or size + len(data) > MAX_FILE_BYTES):
            yield ids, b"".join(parts)
            ids, parts, size = [], [], 0
        ids.append(line.custom_id)
        parts.append(data)
        size += len(data)
    if ids:
        yield ids, b"".join(parts)


def _message(body: Any) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error.get("code") or error)
    return str(error or body)[:ERROR_TEXT]


def line_failure(line: dict[str, Any]) -> TransportError:
    """An error line (or an output line whose status is not 2xx) as a live call would see it."""
    response = line.get("response") if isinstance(line.get("response"), dict) else None
    if response is not None and int(response.get("status_code") or 0) >= 400:
        status = int(response["status_code"])
        body = response.get("body")
        text = _message(body)
        kind = "rate_limit" if status == 429 else "server" if status >= 500 else "client"
        return TransportError(kind, f"HTTP {status}: {text[:ERROR_TEXT]}", status,
                              body=json.dumps(body) if not isinstance(body, str) else body)
    error: dict[str, Any] = line["error"] if isinstance(line.get("error"), dict) else {}
    code = str(error.get("code") or "error")
    text = f"{code}: {error.get('message') or 'no answer in the batch'}"
    kind = "client" if any(word in code for word in CLIENT_CODES) else "server"
    return TransportError(kind, text[:ERROR_TEXT], body=text)


def read_lines(data: bytes) -> Iterator[dict[str, Any]]:
    for raw in data.splitlines():
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            continue        # a torn line answers nobody; its call is failed as missing
        if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
            yield line


def line_outcome(line: dict[str, Any], spec: ModelSpec) -> Completion | TransportError:
    response = line.get("response") if isinstance(line.get("response"), dict) else None
    if response is None or int(response.get("status_code") or 0) >= 400 or line.get("error"):
        return line_failure(line)
    body = response.get("body")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return TransportError("server", "a batch answer is not complete JSON")
    try:
        completion = completion_of(body, spec)
    except TransportError as exc:
        return exc
    completion.cost = batch_cost(spec.model, completion.usage)
    return completion


def names_model(answered: str, asked: str) -> bool:
    """Whether an answer's `model` is the model asked for: the same name (case aside, without a
    provider prefix), or that name with a snapshot or tag after it."""
    answered, asked = (name.rsplit("/", 1)[-1].lower() for name in (answered, asked))
    return answered == asked or (answered.startswith(asked) and bool(_SNAPSHOT.match(answered, len(asked))))


Outcome = Completion | TransportError


def answers(files: Iterable[bytes], spec: ModelSpec, batch_id: str) -> tuple[dict[str, Outcome], str]:
    """Each call's outcome from a batch's output and error files, by custom_id, and what was
    wrong with them ('' when nothing): a call answered by more than one line, or by an answer
    naming another model, gets an error instead (no line of it is used, so none is cached)."""
    outcomes: dict[str, Outcome] = {}
    lines: Counter[str] = Counter()
    for data in files:
        for line in read_lines(data):
            key = line["custom_id"]
            lines[key] += 1
            if lines[key] == 1:
                outcomes[key] = line_outcome(line, spec)
    repeated = [key for key, n in lines.items() if n > 1]
    for key in repeated:
        outcomes[key] = TransportError("server", f"batch {batch_id} holds {lines[key]} answer lines for this call: "
                                                 f"none is used")
    asked = wire_model(spec.model)
    others: dict[str, str] = {}
    for key, outcome in outcomes.items():
        if isinstance(outcome, Completion) and not names_model(outcome.model, asked):
            others[key] = outcome.model
            outcomes[key] = TransportError("server", f"batch {batch_id} answered this call with model "
                                                     f"{outcome.model[:80]}, not {asked}: not used")
    said = [f"{len(repeated)} call(s) answered more than once" if repeated else "",
            f"{len(others)} call(s) answered by another model ({', '.join(sorted(set(others.values())))[:200]})"
            if others else ""]
    problem = ", ".join(part for part in said if part)
    return outcomes, f"{problem}; those calls get an error and nothing of theirs is cached" if problem else ""


def batch_cost(model: str, usage: dict[str, int]) -> float | None:
    found = batch_price_of(model)
    return None if found is None else found[0].cost(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0))


def batch_problem(batch: dict[str, Any]) -> str:
    errors = batch.get("errors") or {}
    data = errors.get("data") if isinstance(errors, dict) else None
    texts = [str(e.get("message") or e.get("code")) for e in data or [] if isinstance(e, dict)]
    return "; ".join(dict.fromkeys(texts))[:500]


def unsupported(error: TransportError) -> TransportError:
    if error.status in (404, 405):
        return TransportError("client", f"{error.message} (does the endpoint serve /v1/files and /v1/batches? "
                                        f"Without them, run the model live: batch: false)", error.status)
    return error


async def quietly(lookup: Awaitable[dict[str, Any] | None]) -> dict[str, Any] | None:
    try:
        return await lookup
    except TransportError:
        return None
