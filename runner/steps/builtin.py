"""Imports every shipped step type so each registers itself."""

from . import compute, decide, foreach, llm, loop, read_lines  # noqa: F401
