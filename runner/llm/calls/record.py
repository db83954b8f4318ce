"""One call's line in calls.jsonl (see runner/llm/calls/__init__.py), and the call as text:
a header, `=== PROMPT ===` and `=== RESPONSE ===`."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from runner.safetext import dumps, utf8

# `item` is the first field of every line: a reader picks an item's lines without parsing the others.
ITEM_PREFIX = re.compile(rb'\{"item":\s*(-?\d+)')


def utc(ns: int) -> str:
    """A time of calls.jsonl (`started`, `ended`)."""
    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat(timespec="milliseconds")


def line_of(record: dict[str, Any]) -> bytes:
    """A record as one line of calls.jsonl."""
    return utf8(dumps(record) + "\n")


def item_of(line: bytes) -> int | None:
    """The item a line of calls.jsonl belongs to, read from its start (None: not a call's line)."""
    found = ITEM_PREFIX.match(line)
    return int(found.group(1)) if found else None


def format_messages(messages: list[dict[str, Any]]) -> str:
    """A prompt as a person reads it: one user message as it is, else each under its role."""
    if len(messages) == 1 and messages[0].get("role") == "user":
        return str(messages[0].get("content", ""))
    return "\n\n".join(f"[{m.get('role')}]\n{m.get('content', '')}" for m in messages)


def response_text(record: dict[str, Any]) -> str:
    """What the model said, or `ERROR: ...` (with whatever answer came) for a failed call."""
    answer = record.get("answer") or ""
    if record.get("error"):
        return f"ERROR: {record['error']}" + (f"\n\n{answer}" if answer else "")
    return str(answer)


def header(record: dict[str, Any]) -> str:
    """`### call 2.1: item 2, step judge, model local (openai/local-model), sent, 1 attempt(s), 412 ms`."""
    attempts = record.get("attempts")
    return (f"### call {record.get('call')}: item {record.get('item')}, step {record.get('step')}, "
            f"model {record.get('model')} ({record.get('model_id')}), "
            f"{'cached' if record.get('cached') else f'sent, {attempts} attempt(s)'}, {record.get('latency_ms')} ms")


def text_of(record: dict[str, Any]) -> str:
    """The call as text: a header line, its prompt and its response."""
    messages = record.get("messages")
    prompt = format_messages(messages) if isinstance(messages, list) else ""
    return f"{header(record)}\n=== PROMPT ===\n{prompt}\n\n=== RESPONSE ===\n{response_text(record)}\n"
