"""`quote_match`: the quote matcher as a step (the same as the Jinja function)."""

from __future__ import annotations

from typing import Any

from ..context import StepContext
from ..errors import StepError
from ..quotes import DEFAULT_SEARCH_IN, Source, match_quote, source_from_read_lines
from ..result_shapes import closed
from .base import Step, register


@register
class QuoteMatch(Step):
    name = "quote_match"
    summary = "Check a quote against a read_lines source or raw text: passed, score, status, lines, flags."
    result = closed({"passed": {"type": "boolean"}, "score": {"type": "number"}, "status": {"type": "string"},
                     "matched_text": {"type": "string"}, "lines": {"type": ["array", "null"]},
                     "in_cited_range": {"type": ["boolean", "null"]}, "flags": {"type": "array"},
                     "method_version": {"type": "string"}, "reason": {"type": "string"}})

    async def run(self, ctx: StepContext) -> Any:
        args = ctx.args
        threshold = float(args.get("threshold", 0.8))
        if "source" in args:
            read = args["source"]
            if not isinstance(read, dict):
                raise StepError(f"{ctx.where('source')}: expected a read_lines result, got {type(read).__name__}")
            source = source_from_read_lines(read, list(args.get("search_in") or DEFAULT_SEARCH_IN))
        else:
            source = Source([(str(args["text"]), int(args.get("first_line", 1) or 1))])
        return match_quote(str(args["quote"]), source, threshold).as_dict()
