"""The HTML of `runner view`: server-rendered Jinja templates (runner/view/templates/) in an
environment that escapes every value; numbers and times formatted for people."""

from __future__ import annotations

import json
from datetime import datetime
from functools import cache
from typing import Any

import jinja2

from runner.engine.rates import rate_text


def _when(value: Any) -> str:
    """2026-11-24T06:36:45+00:00 -> 2026-11-24 06:36 UTC."""
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    return moment.strftime("%Y-%m-%d %H:%M") + (" UTC" if moment.utcoffset() is not None else "")


def _rate(entry: Any) -> str:
    """A rate with what it is over: `71.4% (5/7; 1 left out: 1 errored)`, `n/a (0 judged)`."""
    return rate_text(entry, percent=True) if isinstance(entry, dict) else "-"


def _money(value: Any) -> str:
    return f"${value:.4f}" if isinstance(value, (int, float)) and value else "-"


def _seconds(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "-"
    return f"{value:.1f} s" if value < 120 else f"{value / 60:.1f} min"


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("runner.view", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(when=_when, rate=_rate, money=_money, seconds=_seconds, show=_show)
    return env


def render(template: str, **values: Any) -> str:
    return environment().get_template(template).render(**values)
