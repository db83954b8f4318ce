"""Run-level warnings: said once per run, kept in summary.json (`run_warnings`) and shown
by the CLI and the report."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner.redact import redact

if TYPE_CHECKING:
    from runner.engine.context import Runtime


def _warnings(runtime: Runtime) -> list[str]:
    return []


def add_warning(runtime: Runtime, message: str) -> None:
    message = redact(message)
    warnings = runtime.resource(_warnings)
    if message not in warnings:
        warnings.append(message)


def run_warnings(runtime: Runtime) -> list[str]:
    return list(runtime.resource(_warnings))
