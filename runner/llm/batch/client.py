"""OpenAI's Batch API over plain HTTP, for any gateway that serves /v1/files and /v1/batches
(Azure OpenAI, vLLM ...): the JSONL request lines uploaded as a file (`purpose=batch`), batches
created, retrieved, listed and cancelled, and the output and error lines read back, each a
completion at the batch price or a failure classified as a live call's. httpx is imported when
the first batch is sent."""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runner.llm.client.http import ERROR_TEXT, api_key, status_error, wire_model
from runner.llm.client.prices import batch_price_of
from runner.llm.client.spec import OPENAI_BASE, ModelSpec
from runner.llm.client.transport import Completion, TransportError, completion_of

if TYPE_CHECKING:
    import httpx

CHAT_URL = "/v1/chat/completions"
WINDOW = "24h"
MAX_FILE_BYTES = 190 * 1024 * 1024       # the provider takes 200 MB per file; headers and rounding aside
# Line error codes that name a fault of the request itself: the same line would fail again.
CLIENT_CODES = ("invalid", "not_found", "unsupported", "too_long", "context_length", "cancelled")
# What may follow the model asked for in an answer's `model`: a dated or numbered snapshot
# (gpt-4o-mini-2024-07-18, claude-x@20240620) or a tag (llama3:latest).
_SNAPSHOT = re.compile(r"(-|@)\d|:")
Outcome = Completion | TransportError


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


class BatchClient:
    """One endpoint's files and batches."""

    def __init__(self, spec: ModelSpec):
        import httpx
        self._httpx = httpx
        key = api_key(spec)
        self._client = httpx.AsyncClient(
            base_url=(spec.api_base or OPENAI_BASE).rstrip("/") + "/", trust_env=False,
            timeout=httpx.Timeout(max(spec.timeout, 60.0)),
            headers={"Authorization": f"Bearer {key}"} if key else {})

    async def _request(self, method: str, path: str, doing: str, **kwargs: Any) -> httpx.Response:
        try:
            response = await self._client.request(method, path, **kwargs)
        except self._httpx.TimeoutException:
            raise TransportError("timeout", f"{doing}: request timed out") from None
        except (self._httpx.TransportError, OSError) as exc:
            refused = _refused(exc)
            raise TransportError("refused" if refused else "connection",
                                 f"{doing}: connection {'refused' if refused else f'failed: {exc}'}") from None
        if response.status_code >= 400:
            raise status_error(response.status_code, response.headers, response.text, doing)
        return response

    async def _json(self, method: str, path: str, doing: str, **kwargs: Any) -> dict[str, Any]:
        response = await self._request(method, path, doing, **kwargs)
        try:
            data = json.loads(response.content)
        except ValueError:
            raise TransportError("server", f"{doing}: the answer is not JSON") from None
        if not isinstance(data, dict):
            raise TransportError("server", f"{doing}: the answer is not a JSON object")
        return data

    async def upload(self, lines: bytes) -> str:
        name = f"runner-{uuid.uuid4().hex[:12]}.jsonl"
        data = await self._json("POST", "files", "uploading the batch file", data={"purpose": "batch"},
                                files={"file": (name, lines, "application/jsonl")})
        return str(data["id"])

    async def create(self, file_id: str, submission: str) -> dict[str, Any]:
        return await self._json("POST", "batches", "creating the batch", json={
            "input_file_id": file_id, "endpoint": CHAT_URL, "completion_window": WINDOW,
            "metadata": {"runner_submission": submission}})

    async def retrieve(self, batch_id: str) -> dict[str, Any]:
        return await self._json("GET", f"batches/{batch_id}", f"polling batch {batch_id}")

    async def cancel(self, batch_id: str) -> dict[str, Any]:
        return await self._json("POST", f"batches/{batch_id}/cancel", f"cancelling batch {batch_id}")

    async def find(self, submission: str) -> dict[str, Any] | None:
        """The batch created with this submission id, if the provider has one (a run killed
        between creating a batch and writing its id down)."""
        after: str | None = None
        for _ in range(20):         # the newest 2,000 batches: a submission is minutes old
            params: dict[str, Any] = {"limit": 100, **({"after": after} if after else {})}
            page = await self._json("GET", "batches", "listing batches", params=params)
            data = [b for b in page.get("data") or [] if isinstance(b, dict)]
            for batch in data:
                if (batch.get("metadata") or {}).get("runner_submission") == submission:
                    return batch
            if not page.get("has_more") or not data:
                return None
            after = str(data[-1].get("id"))
        return None

    async def content(self, file_id: str) -> bytes:
        response = await self._request("GET", f"files/{file_id}/content", f"reading file {file_id}")
        return response.content

    async def files(self, batch: dict[str, Any]) -> list[bytes]:
        """The batch's output and error files, those it has."""
        return [await self.content(str(batch[name])) for name in ("output_file_id", "error_file_id") if batch.get(name)]

    async def aclose(self) -> None:
        await self._client.aclose()


def _message(body: Any) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error.get("code") or error)
    return str(error or body)[:ERROR_TEXT]


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


def line_outcome(line: dict[str, Any], spec: ModelSpec) -> Outcome:
    """An output or error line as a live call would see it: its completion (at the batch price), or its failure."""
    response = line.get("response") if isinstance(line.get("response"), dict) else None
    status = int(response.get("status_code") or 0) if response is not None else 0
    if status >= 400:
        body = response.get("body") if response is not None else None
        kind = "rate_limit" if status == 429 else "server" if status >= 500 else "client"
        return TransportError(kind, f"HTTP {status}: {_message(body)[:ERROR_TEXT]}", status,
                              body=json.dumps(body) if not isinstance(body, str) else body)
    if response is None or line.get("error"):
        error: dict[str, Any] = line["error"] if isinstance(line.get("error"), dict) else {}
        code = str(error.get("code") or "error")
        text = f"{code}: {error.get('message') or 'no answer in the batch'}"
        kind = "client" if any(word in code for word in CLIENT_CODES) else "server"
        return TransportError(kind, text[:ERROR_TEXT], body=text)
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
    """Whether an answer's `model` is the model asked for (case and provider prefix aside), or
    that name with a snapshot or tag after it."""
    answered, asked = (name.rsplit("/", 1)[-1].lower() for name in (answered, asked))
    return answered == asked or (answered.startswith(asked) and bool(_SNAPSHOT.match(answered, len(asked))))


def answers(files: Iterable[bytes], spec: ModelSpec, batch_id: str) -> tuple[dict[str, Outcome], str]:
    """Each call's outcome from a batch's output and error files, by custom_id, and what was wrong
    ('' when nothing): a call answered by several lines, or naming another model, gets an error."""
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


def _refused(exc: BaseException | None) -> bool:
    """Whether a connection was refused: httpx says "All connection attempts failed" and keeps the
    ConnectionRefusedError down its chain of causes."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, ConnectionRefusedError) or "refused" in str(exc).lower():
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__      # httpcore keeps the OSError as a suppressed context
    return False


def unsupported(error: TransportError) -> TransportError:
    if error.status in (404, 405):
        return TransportError("client", f"{error.message} (does the endpoint serve /v1/files and /v1/batches? "
                                        f"Without them, run the model live: batch: false)", error.status)
    return error
