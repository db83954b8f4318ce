"""Model entries of a pipeline, rendered into call-ready specs."""

from __future__ import annotations

import ipaddress
import sys
from collections.abc import Collection
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from runner.errors import RunnerError
from runner.llm.client.prices import provider_of
from runner.redact import remember_url

SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "seed", "stop")
DEFAULT_MAX_TOKENS = 1024
TRANSPORTS = ("auto", "http", "litellm")
BATCH_MAX_REQUESTS = 50_000        # the provider's limit per batch file (OpenAI, Azure)
OPENAI_BASE = "https://api.openai.com/v1"
LOOPBACK_NAME = "localhost"
OLLAMA_PREFIXES = ("ollama_chat/", "ollama/")
OLLAMA_DEFAULT_BASE = "http://localhost:11434"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    model: str
    api_base: str | None
    api_key: str | None = field(repr=False, default=None)
    enabled: bool = True
    sampling: dict[str, Any] = field(default_factory=dict)
    timeout: float = 120.0
    retries: int = 3
    backoff: float = 1.0
    extra: dict[str, Any] = field(default_factory=dict)
    limits: dict[str, int] = field(default_factory=dict)
    transport: str = "litellm"          # resolved: http, litellm or a registered one (routing.py)
    structured_output: str = "auto"
    batch: bool = False                # answered through the provider's batch API (runner/llm/batch/)
    batch_max_requests: int = BATCH_MAX_REQUESTS
    batch_max_wait: float = 60.0       # seconds a gathered call waits for the others before its batch goes
    batch_poll_seconds: float = 30.0
    batch_retry: str = "batch"         # where an error line is retried: the next batch, or live
    max_response_bytes: int = 8 * 1024 * 1024    # read at most this much of an answer (decompressed)
    cache_as: str | None = None         # stands for the endpoint in cache keys (see runner/llm/cache/key.py)

    @property
    def batchable(self) -> bool:
        """The endpoint speaks OpenAI's /v1/files and /v1/batches (plain HTTP)."""
        return self.transport == "http"

    @property
    def endpoint(self) -> str:
        """What the breaker keys on: the base URL, or the provider when there is none."""
        if self.api_base:
            return self.api_base
        return f"{self.model.split('/', 1)[0]} (provider default)" if "/" in self.model else "the provider default"

    @property
    def local(self) -> bool:
        """The endpoint is on this machine (a local server, often serving one request at a time)."""
        return bool(self.api_base) and is_local(self.api_base or "")

    def describe(self) -> str:
        return f"model '{self.name}' ({self.model}) at {self.endpoint}"


DEFAULTS = {spec_field.name: spec_field.default for spec_field in fields(ModelSpec)}


def host_identity(name: str) -> str:
    """A host in one spelling: lowercase, any loopback address as `localhost` (what the cache
    key names a server by, and what makes an endpoint local)."""
    host = name.lower().rstrip(".")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    return LOOPBACK_NAME if address.is_loopback else address.compressed


@lru_cache(maxsize=256)      # asked for every call of a model, of the run's handful of URLs
def is_local(url: str) -> bool:
    return host_identity(urlsplit(url).hostname or "") == LOOPBACK_NAME


def openai_route(model: str, api_base: str | None, transport: str,
                 registered: Collection[str] = ()) -> tuple[str, str | None, str]:
    """(model, api_base, transport) as sent. A model whose provider is a transport registered in
    this process (`scripted/judge`, see routing.py) goes to it. An Ollama model at an OpenAI-
    compatible `/v1` base (or declared `transport: http`) is `openai/NAME` over HTTP, so the
    Ollama pipelines' OLLAMA_BASE_URL may point at any OpenAI-compatible server."""
    provider = model.split("/", 1)[0] if "/" in model else ""
    if transport == "auto" and provider in registered:
        return model, api_base, provider
    if not model.startswith(OLLAMA_PREFIXES) or transport == "litellm":
        if transport == "auto":     # HTTP for `openai/...` and bare OpenAI model names, litellm for the rest
            bare_openai = "/" not in model and api_base is None and provider_of(model) == "openai"
            transport = "http" if model.startswith("openai/") or bare_openai else "litellm"
        return model, api_base, transport
    served_v1 = urlsplit(api_base or "").path.rstrip("/").endswith("/v1")
    if transport == "auto" and not served_v1:
        return model, api_base, "litellm"
    base = api_base or OLLAMA_DEFAULT_BASE
    return "openai/" + model.split("/", 1)[1], base if served_v1 else f"{base}/v1", "http"


def check_api_base(value: str) -> str | None:
    """Why an api_base is unusable, or None."""
    try:
        parts = urlsplit(value)
        parts.port      # noqa: B018 - raises on a bad port
    except ValueError as exc:
        return f"not a usable URL ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "not a usable URL (expected http://HOST[:PORT]/PATH or https://...)"
    return None


# The numbers of a model entry: the least each may be, and its type (its default is ModelSpec's).
NUMBERS = {"timeout": (0.001, float), "retries": (0, int), "backoff": (0, float), "batch_max_requests": (1, int),
           "batch_max_wait": (0, float), "batch_poll_seconds": (0.001, float), "max_response_bytes": (1, int)}


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def _at_least(key: str, value: Any, low: float, convert: Any) -> Any:
    number = convert(value)
    if number < low or number != number:      # NaN is not a usable limit either
        raise ValueError(f"{key} must be at least {low:g}, not {value}")
    return number


def build_spec(name: str, entry: dict[str, Any], registered: Collection[str] = ()) -> ModelSpec:
    """`entry` is already rendered, and checked against the pipeline schema (its enums among them);
    `registered`: the transports registered in this process (routing.registered_transports())."""
    try:
        sampling = {k: entry[k] for k in SAMPLING_KEYS if entry.get(k) is not None}
        for key, convert in (("temperature", float), ("top_p", float), ("max_tokens", int), ("seed", int)):
            if key in sampling:
                sampling[key] = convert(sampling[key])
        sampling["max_tokens"] = _at_least("max_tokens", sampling.get("max_tokens", DEFAULT_MAX_TOKENS), 1, int)
        limits = {k: _at_least(f"limits.{k}", v, 0 if k == "requests_per_day" else 1, int)
                  for k, v in (entry.get("limits") or {}).items() if v is not None}
        api_base = (str(entry["api_base"]).rstrip("/") or None) if entry.get("api_base") else None
        remember_url(api_base or "")
        if api_base and (problem := check_api_base(api_base)):
            raise ValueError(f"api_base '{api_base}' is {problem}")
        model, api_base, transport = openai_route(str(entry["model"]), api_base, entry.get("transport") or "auto",
                                                  registered)
        numbers = {key: _at_least(key, entry.get(key, DEFAULTS[key]), low, convert)
                   for key, (low, convert) in NUMBERS.items()}
        numbers["batch_max_requests"] = min(BATCH_MAX_REQUESTS, numbers["batch_max_requests"])
        return ModelSpec(
            name=name, model=model, api_base=api_base,
            api_key=str(entry["api_key"]) if entry.get("api_key") else None,
            enabled=_truthy(entry.get("enabled", True)), sampling=sampling,
            extra=dict(entry.get("params") or {}), limits=limits, transport=transport,
            structured_output=entry.get("structured_output") or "auto", batch=_truthy(entry.get("batch", False)),
            batch_retry=entry.get("batch_retry") or "batch",
            cache_as=(str(entry["cache_as"]).strip() or None) if entry.get("cache_as") else None, **numbers)
    except (TypeError, ValueError) as exc:
        raise RunnerError(f"models.{name}: {exc}") from None


def batch_choice(spec: ModelSpec, run_batches: bool) -> ModelSpec:
    """The spec as this run sends it: batched when the model asks for it (or the run does,
    `--batch`) and its endpoint has a batch API; live otherwise, said once per model."""
    if not (spec.batch or run_batches) or not spec.enabled:     # a model that takes no seat is not mentioned
        return spec
    if spec.batchable:
        return spec if spec.batch else replace(spec, batch=True)
    sys.stderr.write(f"runner: {spec.describe()} has no batch API runner can use (transport {spec.transport}; "
                     f"batches need an OpenAI-compatible endpoint): its calls stay live\n")
    return replace(spec, batch=False)
