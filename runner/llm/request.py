"""What a step asks the LLM service (CallRequest), and what the layers of a call pass each other.

A call is answered by layers around one transport (runner/llm/service.py puts them together):
each takes an `Ask` (one request: a re-ask to repair an answer is another) and gives a `Reply`,
or raises `Failed` saying what the request left. A `Recorder` takes each request made with its
outcome (`Made`): calls.jsonl and tracing, or `runner render`'s printout."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:       # the engine's interface imports this module: the client comes with the first call
    from runner.llm.client.sender import ModelStats
    from runner.llm.client.spec import ModelSpec
    from runner.llm.client.transport import Completion

_GROUPS = itertools.count(1)


def new_group() -> int:
    """A fresh id for the calls of one step run (one llm call, or the seats of one jury)."""
    return next(_GROUPS)


@dataclass
class CallRequest:
    model: str                         # a name under models:
    messages: list[dict[str, Any]]
    item: int
    step: str = ""                     # the id of the step that asks
    output_schema: dict[str, Any] | None = None
    as_json: bool = False
    repair: int = 0
    sampling: dict[str, Any] = field(default_factory=dict)
    sample: int = 0
    group: int = 0                     # calls of one step run share it (see tally.py)
    logprobs: bool = False             # ask for token probabilities (a step's `confidence: true`)
    embed: bool = False                # an embeddings request: the messages' contents are the texts


@dataclass
class Ask:
    """One request of a call, as the layers pass it down."""

    request: CallRequest
    spec: ModelSpec
    messages: list[dict[str, Any]]     # as sent, keyed and logged
    sampling: dict[str, Any]           # the model's, then the step's: part of the key
    mode: str                          # the structured-output mode asked for ('none': no schema)
    key_for: Callable[[str], str]      # the cache key of this request asked in a structured-output mode
    stats: ModelStats                  # the model's counts
    cached: dict[str, Any] | None = None     # the cache's usable answer, found by the cache layer
    sent: bool = False                       # a request of it went out (counted in stats.calls)

    @functools.cached_property
    def key(self) -> str:
        """The cache key of this request as asked."""
        return self.key_for(self.mode)

    @property
    def params(self) -> dict[str, Any]:
        """What is sent beside the messages: the sampling, and the ask for token probabilities."""
        from runner.llm import logprobs
        return {**self.sampling, **logprobs.REQUEST} if self.request.logprobs else self.sampling


@dataclass
class Reply:
    """A request's answer: the cache's or the transport's; `output` once it is read."""

    completion: Completion
    key: str                           # where the answer is kept (the mode the sender settled on names it)
    cached: bool = False
    attempts: int = 0                  # requests sent for it, retries included (none for a cached answer)
    output: Any = None


class Failed(Exception):
    """A request that got no usable answer: why, and what it left (its reply, the attempts it took);
    `reask`: the messages that ask again, when an answer came that could not be read."""

    def __init__(self, message: str, reply: Reply | None = None, attempts: int = 0,
                 reask: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.message = message
        self.reply = reply
        self.attempts = reply.attempts if reply is not None else attempts
        self.reask = reask


class Layer(Protocol):
    """A layer of the call, or the transport under them all."""

    async def __call__(self, ask: Ask) -> Reply: ...


@dataclass
class Made:
    """One request as it was made, for a recorder: its reply, or the error that ended it."""

    ask: Ask
    number: str                        # `item.n`: the n-th request of the item
    began_ns: int
    ended_ns: int
    reply: Reply | None
    error: str | None = None
    attempts: int = 0


class Recorder(Protocol):
    def record(self, made: Made) -> None: ...
