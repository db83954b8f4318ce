"""OpenAI's Batch API over plain HTTP: upload a JSONL file (`purpose=batch`), create,
retrieve, list and cancel batches, read output and error files. Works with any
OpenAI-compatible gateway that serves /v1/files and /v1/batches (Azure OpenAI, vLLM ...).

httpx is imported when the first batch is sent: a live or cached run never loads it here."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

from runner.llm.batch.lines import CHAT_URL
from runner.llm.client.http import api_key, status_error
from runner.llm.client.spec import OPENAI_BASE, ModelSpec
from runner.llm.client.transport import TransportError

if TYPE_CHECKING:
    import httpx

WINDOW = "24h"


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
            refused = "refused" in str(exc).lower()
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

    async def aclose(self) -> None:
        await self._client.aclose()
