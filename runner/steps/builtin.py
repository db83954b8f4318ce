"""Imports every shipped step type so each registers itself."""

from . import compute, decide, foreach, jury, llm, loop, read_lines  # noqa: F401
