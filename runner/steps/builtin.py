"""Imports every shipped step type so each registers itself."""

from . import compute, decide, fail, foreach, jury, llm, loop, quote_match, read_lines, read_table, search  # noqa: F401
