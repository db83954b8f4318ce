"""Model entries of a pipeline, rendered into call-ready specs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import RunnerError

SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "seed", "stop")
DEFAULT_TIMEOUT = 120.0
DEFAULT_RETRIES = 3


@dataclass(frozen=True)
class ModelSpec:
    name: str
    model: str
    api_base: str | None
    api_key: str | None = field(repr=False, default=None)
    enabled: bool = True
    sampling: dict[str, Any] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    retries: int = DEFAULT_RETRIES
    backoff: float = 1.0
    extra: dict[str, Any] = field(default_factory=dict)
    limits: dict[str, int] = field(default_factory=dict)

    @property
    def endpoint(self) -> str:
        """What the breaker keys on: the base URL, or the provider when there is none."""
        if self.api_base:
            return self.api_base
        return f"{self.model.split('/', 1)[0]} (provider default)" if "/" in self.model else "the provider default"

    def describe(self) -> str:
        return f"model '{self.name}' ({self.model}) at {self.endpoint}"


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def build_spec(name: str, entry: dict[str, Any]) -> ModelSpec:
    """`entry` is already rendered."""
    try:
        sampling = {k: entry[k] for k in SAMPLING_KEYS if entry.get(k) is not None}
        if "temperature" in sampling:
            sampling["temperature"] = float(sampling["temperature"])
        if "top_p" in sampling:
            sampling["top_p"] = float(sampling["top_p"])
        for key in ("max_tokens", "seed"):
            if key in sampling:
                sampling[key] = int(sampling[key])
        limits = {k: int(v) for k, v in (entry.get("limits") or {}).items() if v is not None}
        return ModelSpec(
            name=name, model=str(entry["model"]), api_base=(str(entry["api_base"]).rstrip("/") or None)
            if entry.get("api_base") else None,
            api_key=str(entry["api_key"]) if entry.get("api_key") else None,
            enabled=_truthy(entry.get("enabled", True)), sampling=sampling,
            timeout=float(entry.get("timeout", DEFAULT_TIMEOUT)), retries=int(entry.get("retries", DEFAULT_RETRIES)),
            backoff=float(entry.get("backoff", 1.0)),
            extra=dict(entry.get("params") or {}), limits=limits)
    except (TypeError, ValueError) as exc:
        raise RunnerError(f"models.{name}: {exc}") from None
