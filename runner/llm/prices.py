"""Token prices from litellm's bundled price table, read as data.

The table ships inside the litellm package (model_prices_and_context_window_backup.json);
reading the file costs milliseconds, importing litellm seconds, so cost estimates and the
cost of answers that did not go through litellm never import it."""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

TABLE_FILE = "model_prices_and_context_window_backup.json"


@dataclass(frozen=True)
class Price:
    input_per_token: float
    output_per_token: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return prompt_tokens * self.input_per_token + completion_tokens * self.output_per_token


@cache
def _text() -> str:
    """The table's text ('' when litellm or its table is not there)."""
    spec = importlib.util.find_spec("litellm")     # locates the package without importing it
    locations = list(spec.submodule_search_locations or []) if spec else []
    for folder in locations:
        file = Path(folder) / TABLE_FILE
        if file.is_file():
            try:
                return file.read_text(encoding="utf-8")
            except (OSError, ValueError):
                return ""
    return ""


@cache
def _table() -> dict[str, Any]:
    try:
        table = json.loads(_text() or "{}")
    except ValueError:
        return {}
    return table if isinstance(table, dict) else {}


_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')


@cache
def _escaped_strings() -> frozenset[str]:
    """Every string of the table's text written with an escape, decoded. Such a string holds
    a backslash, and a JSON string never spans lines: the few lines with a backslash are
    read string by string."""
    text = _text()
    found: set[str] = set()
    at = text.find("\\")
    while at != -1:
        start, end = text.rfind("\n", 0, at) + 1, text.find("\n", at)
        end = len(text) if end == -1 else end
        for token in _STRING.findall(text, start, end):
            try:
                found.add(json.loads(token))
            except ValueError:
                pass
        at = text.find("\\", end)
    return frozenset(found)


def _surely_absent(name: str) -> bool:
    """Whether no string in the table's text is `name`, known without parsing the table (its
    2.4 MB take 13 ms to parse, paid by every run with a local model, which it never names):
    a string is either written as is, or holds an escape."""
    return json.dumps(name, ensure_ascii=False) not in _text() and name not in _escaped_strings()


@cache                # asked for every answer; the table does not change during a process
def price_of(model: str) -> Price | None:
    """The price of a litellm model string (`gpt-4o-mini`, `openai/gpt-4o-mini`,
    `gemini/gemma-3-27b-it`), or None when the table does not know it (local models)."""
    candidates = [model]
    if "/" in model:
        candidates.append(model.split("/", 1)[1])     # openai/gpt-4o-mini is priced as gpt-4o-mini
    for name in candidates:
        entry = None if _surely_absent(name) else _table().get(name)
        if isinstance(entry, dict) and "input_cost_per_token" in entry:
            try:
                return Price(float(entry.get("input_cost_per_token") or 0.0),
                             float(entry.get("output_cost_per_token") or 0.0))
            except (TypeError, ValueError):
                return None
    return None


def cost_of(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """What a call cost by the table, or None when the model has no price."""
    price = price_of(model)
    return None if price is None else price.cost(prompt_tokens, completion_tokens)


def provider_of(model: str) -> str | None:
    """The provider the table names for a bare model name (`gpt-4o-mini` -> openai), or None."""
    entry = _table().get(model)
    provider = entry.get("litellm_provider") if isinstance(entry, dict) else None
    return provider if isinstance(provider, str) else None


def batch_price_of(model: str) -> tuple[Price, bool] | None:
    """The batch price (provider batch APIs) and whether the table lists it; when it does
    not, half the live price, the usual discount (an estimate). None: no price at all."""
    live = price_of(model)
    if live is None:
        return None
    table = _table()
    for name in (model, model.split("/", 1)[-1]):
        entry = table.get(name)
        if isinstance(entry, dict) and "input_cost_per_token_batches" in entry:
            try:
                return Price(float(entry.get("input_cost_per_token_batches") or 0.0),
                             float(entry.get("output_cost_per_token_batches") or 0.0)), True
            except (TypeError, ValueError):
                break
    return Price(live.input_per_token / 2, live.output_per_token / 2), False
