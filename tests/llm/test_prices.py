"""Prices come from litellm's bundled table, read as data: no litellm import."""

from __future__ import annotations

import subprocess
import sys


def test_known_and_unknown_models():
    from runner.llm.prices import cost_of, price_of
    price = price_of("gpt-4o-mini")
    assert price is not None and price.input_per_token > 0 and price.output_per_token > price.input_per_token
    assert price_of("openai/gpt-4o-mini") == price
    assert cost_of("gpt-4o-mini", 1000, 100) == 1000 * price.input_per_token + 100 * price.output_per_token
    assert price_of("openai/local-model") is None and cost_of("openai/local-model", 10, 10) is None


def test_reading_prices_does_not_import_litellm():
    code = ("import sys; from runner.llm.prices import price_of; assert price_of('gpt-4o-mini'); "
            "assert 'litellm' not in sys.modules, 'litellm was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_name_the_table_lacks_is_known_without_parsing_it():
    import json

    from runner.llm import prices
    table = json.loads(prices._text())
    assert table, "litellm's price table was not found"
    assert not any(prices._surely_absent(name) for name in table)      # every key is found
    assert prices._surely_absent("openai/local-model") and prices._surely_absent("local-model")


def test_a_name_written_with_escapes_is_not_taken_for_absent(monkeypatch):
    import functools
    import json

    from runner.llm import prices
    text = ('{\n  "plain": {"input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06},\n'
            '  "acme\\/gpt\\u002dx": {"input_cost_per_token": 3e-06, "output_cost_per_token": 4e-06,'
            ' "note": "say \\"hi\\""},\n  "q\\"uote": {}\n}\n')
    assert set(json.loads(text)) == {"plain", "acme/gpt-x", 'q"uote'}
    monkeypatch.setattr(prices, "_text", lambda: text)
    monkeypatch.setattr(prices, "_escaped_strings", functools.cache(prices._escaped_strings.__wrapped__))
    assert not prices._surely_absent("acme/gpt-x")          # only in escaped form
    assert not prices._surely_absent('q"uote')
    assert not prices._surely_absent("plain") and not prices._surely_absent('say "hi"')
    assert prices._surely_absent("acme/gpt") and prices._surely_absent("gpt-x") and prices._surely_absent("hi")
