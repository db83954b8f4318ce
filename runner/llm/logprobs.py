"""Token probabilities: what a step asks of the server when it wants them, what the answer
carries, and the confidence of one value of an answer computed over that value's tokens.

runner keeps the [token, logprob] pairs of OpenAI's `choices[0].logprobs.content`, not the
alternatives; `top_logprobs` is sent too, as llama-cpp-python answers none without it.

A value's confidence is exp(sum of its tokens' logprobs), the value found by reading the
answer's JSON object key by key with positions, so a token of the key, of the punctuation or
of an earlier mention of the same word (a reason that says VALID before the verdict does) is
never read for it. Tokens that do not spell the answer's text, a value not where the parsed
answer has it, or a logprob that is no log of a probability (above 0, NaN, infinite) give no
confidence (None), never a guess."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from runner.llm.client.parsing import LENIENT, THINKING

TOP_LOGPROBS = 1
REQUEST = {"logprobs": True, "top_logprobs": TOP_LOGPROBS}     # added to the request body when asked
Tokens = list[list[Any]]       # [[token text, logprob], ...]


def tokens_of(logprobs: Any) -> Tokens | None:
    """`choices[0].logprobs` of a chat completion (a mapping, or an SDK object) as [token, logprob]
    pairs; None when the server sent none or sent another shape."""
    content = _get(logprobs, "content")
    if not isinstance(content, list):
        return None
    out: Tokens = []
    for entry in content:
        token, logprob = _get(entry, "token"), _get(entry, "logprob")
        if not isinstance(token, str) or isinstance(logprob, bool) or not isinstance(logprob, (int, float)):
            return None
        out.append([token, float(logprob)])
    return out


def _get(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)


def usable(tokens: Any) -> Tokens | None:
    """Pairs read back from a cache entry, or None when the entry holds something else."""
    if not isinstance(tokens, list):
        return None
    for pair in tokens:
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)
                and isinstance(pair[1], (int, float)) and not isinstance(pair[1], bool)):
            return None
    return tokens


def value_confidence(text: str, tokens: Tokens | None, field: str | None, expected: Any) -> float | None:
    """The probability the model gave the value of `field` in its JSON answer `text` (the
    whole answer, stripped, when `field` is None), or None when it cannot be read."""
    if not tokens:
        return None
    span = _answer_span(text) if field is None else _value_span(text, field, expected)
    if span is None:
        return None
    offset = _tokens_offset(text, tokens)
    if offset is None:
        return None
    start, end = span[0] + offset, span[1] + offset
    total, position, found = 0.0, 0, False
    for token, logprob in tokens:
        following = position + len(token)
        if following > start and position < end:
            if not logprob <= 0:           # above 0 or NaN: no probability's log
                return None
            total += logprob
            found = True
        position = following
        if position >= end:
            break
    if not found or not math.isfinite(total):
        return None
    return round(math.exp(total), 4)


def _tokens_offset(text: str, tokens: Tokens) -> int | None:
    """Where `text` starts in the tokens' own spelling (0 when they spell it exactly), or None
    when they spell something else (an answer cleaned after it came, bytes split oddly)."""
    spelled = "".join(token for token, _ in tokens)
    if spelled == text:
        return 0
    at = spelled.find(text) if text else -1
    return at if at >= 0 and spelled.count(text) == 1 else None


def _answer_span(text: str) -> tuple[int, int] | None:
    start, end = len(text) - len(text.lstrip()), len(text.rstrip())
    return (start, end) if start < end else None


def _value_span(text: str, field: str, expected: Any) -> tuple[int, int] | None:
    """The characters of `field`'s value in the first JSON object of `text` that has it (a
    string's without its quotes), when that value is the one the parsed answer holds."""
    hidden = [(m.start(), m.end()) for m in THINKING.finditer(text)] if "<" in text else []
    position = text.find("{")
    while position != -1:
        if not any(start <= position < end for start, end in hidden):
            found = _object_field(text, position, field)
            if found is not None:
                value, span = found
                return span if value == expected else None
        position = text.find("{", position + 1)
    return None


def _object_field(text: str, start: int, field: str) -> tuple[Any, tuple[int, int]] | None:
    """(value, span) of `field` in the JSON object starting at `start` (its last occurrence, as
    a JSON reader keeps), or None when no object starts there or it lacks the field."""
    found: tuple[Any, tuple[int, int]] | None = None
    at = _skip(text, start + 1)
    try:
        while at < len(text) and text[at] != "}":
            if text[at] != '"':
                return None
            key, at = LENIENT.raw_decode(text, at)
            at = _skip(text, at)
            if text[at:at + 1] != ":":
                return None
            at = _skip(text, at + 1)
            value, end = LENIENT.raw_decode(text, at)
            if key == field:
                found = value, ((at + 1, end - 1) if isinstance(value, str) else (at, end))
            at = _skip(text, end)
            if text[at:at + 1] == ",":
                at = _skip(text, at + 1)
    except (json.JSONDecodeError, ValueError, IndexError):
        return None
    return found if at < len(text) else None


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at
