"""Token prices from the price table litellm ships (model_prices_and_context_window_backup.json),
read as JSON once a process, when a price or a provider is first asked for: cost estimates and
the cost of answers that did not go through litellm never import litellm."""

from __future__ import annotations

import importlib.util
import json
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


@cache                # read once a process: the table does not change while it runs
def _table() -> dict[str, Any]:
    """The table; {} when litellm or its table is not there, or the file is not a JSON object."""
    spec = importlib.util.find_spec("litellm")     # locates the package without importing it
    for folder in list(spec.submodule_search_locations or []) if spec else []:
        file = Path(folder) / TABLE_FILE
        if file.is_file():
            try:
                table = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return {}
            return table if isinstance(table, dict) else {}
    return {}


def price_of(model: str, kind: str = "") -> Price | None:
    """The price of a litellm model string (`gpt-4o-mini`, `openai/gpt-4o-mini`), or None when the
    table does not know it (local models); `kind="_batches"`: the table's batch price."""
    for name in (model, model.split("/", 1)[-1]):       # openai/gpt-4o-mini is priced as gpt-4o-mini
        entry = _table().get(name)
        if isinstance(entry, dict) and f"input_cost_per_token{kind}" in entry:
            try:
                return Price(float(entry.get(f"input_cost_per_token{kind}") or 0.0),
                             float(entry.get(f"output_cost_per_token{kind}") or 0.0))
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
    listed = price_of(model, "_batches")
    return (listed, True) if listed else (Price(live.input_per_token / 2, live.output_per_token / 2), False)
