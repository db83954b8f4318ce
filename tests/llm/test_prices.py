"""Prices come from litellm's bundled table, read as data: no litellm import."""

from __future__ import annotations

import subprocess
import sys


def test_known_and_unknown_models():
    from runner.llm.client.prices import cost_of, price_of
    price = price_of("gpt-4o-mini")
    assert price is not None and price.input_per_token > 0 and price.output_per_token > price.input_per_token
    assert price_of("openai/gpt-4o-mini") == price
    assert cost_of("gpt-4o-mini", 1000, 100) == 1000 * price.input_per_token + 100 * price.output_per_token
    assert price_of("openai/local-model") is None and cost_of("openai/local-model", 10, 10) is None


def test_reading_prices_does_not_import_litellm():
    code = ("import sys; from runner.llm.client.prices import price_of; assert price_of('gpt-4o-mini'); "
            "assert 'litellm' not in sys.modules, 'litellm was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
