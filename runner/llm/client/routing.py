"""Each model's own transport, chosen by `spec.transport`: the built-in `http` and
`litellm`, or a transport registered in this process under a provider name.

`register_transport("scripted", factory)` sends every model whose model string starts
`scripted/` (with `transport: auto`, the default) through `factory()`'s transport: how
runner.testing's scripted model answers a pipeline's calls in-process, and a way to put a
provider runner does not know behind a model string. Registrations live in the process
that made them: worker processes and Ray actors have their own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runner.llm.client.http import HTTPTransport
from runner.llm.client.spec import TRANSPORTS, ModelSpec
from runner.llm.client.transport import Completion, LiteLLMTransport, Transport, TransportError

TransportFactory = Callable[[], Transport]
_registered: dict[str, TransportFactory] = {}


def register_transport(provider: str, factory: TransportFactory) -> None:
    """Send the models named `provider/...` through `factory()`'s transport, made once per
    run on its first call (a later registration under the same name replaces this one)."""
    if provider in TRANSPORTS or not provider.isidentifier():
        raise ValueError(f"'{provider}' cannot name a transport (a Python identifier other than "
                         f"{', '.join(TRANSPORTS)})")
    _registered[provider] = factory


def unregister_transport(provider: str) -> None:
    _registered.pop(provider, None)


def registered_transports() -> tuple[str, ...]:
    """The provider names registered in this process, for build_spec to resolve."""
    return tuple(_registered)


class RoutedTransport:
    """Each model's own transport (`spec.transport`), made on its model's first call: a run that
    sends nothing imports neither aiohttp nor litellm."""

    def __init__(self) -> None:
        self._by_name: dict[str, Transport] = {}

    def _for(self, name: str) -> Transport:
        if name not in self._by_name:
            made: dict[str, TransportFactory] = {"http": HTTPTransport, "litellm": LiteLLMTransport, **_registered}
            if name not in made:
                raise TransportError("client", f"no transport '{name}' is registered in this process "
                                               "(runner.llm.client.routing.register_transport)")
            self._by_name[name] = made[name]()
        return self._by_name[name]

    async def complete(self, spec: ModelSpec, messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        return await self._for(spec.transport).complete(spec, messages, params)

    async def embed(self, spec: ModelSpec, texts: list[str], params: dict[str, Any]) -> Completion:
        transport = self._for(spec.transport)
        if getattr(transport, "embed", None) is None:      # a registered transport made before embeddings
            raise TransportError("client", f"the transport '{spec.transport}' of models.{spec.name} does not "
                                           "answer embeddings requests")
        return await transport.embed(spec, texts, params)

    async def aclose(self) -> None:
        for transport in self._by_name.values():
            await transport.aclose()
