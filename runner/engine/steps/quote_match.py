"""`quote_match`: the quote matcher as a step (the same as the Jinja function)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runner.checks.result_shapes import closed
from runner.engine.context import NOT_GIVEN, StepContext
from runner.engine.steps.base import Step, register
from runner.errors import StepError
from runner.text.quotes import DEFAULT_SEARCH_IN, Source, match_quote, source_from_read_lines


@dataclass(frozen=True)
class QuoteMatchArgs:
    quote: Any
    source: Any = NOT_GIVEN            # a read_lines result ...
    text: Any = None                   # ... or raw text
    first_line: Any = 1
    search_in: list[str] | None = None
    threshold: Any = 0.8


@register
class QuoteMatch(Step):
    name = "quote_match"
    summary = "Check a quote against a read_lines source or raw text: passed, score, status, lines, flags."
    result = closed({"passed": {"type": "boolean"}, "score": {"type": "number"}, "status": {"type": "string"},
                     "matched_text": {"type": "string"}, "lines": {"type": ["array", "null"]},
                     "in_cited_range": {"type": ["boolean", "null"]}, "flags": {"type": "array"},
                     "method_version": {"type": "string"}, "reason": {"type": "string"}})

    async def run(self, ctx: StepContext) -> Any:
        args = ctx.arguments(QuoteMatchArgs)
        if args.source is not NOT_GIVEN:
            read = args.source
            if not isinstance(read, dict):
                raise StepError(f"{ctx.where('source')}: expected a read_lines result, got {type(read).__name__}")
            source = source_from_read_lines(read, list(args.search_in or DEFAULT_SEARCH_IN))
        else:
            source = Source([(str(args.text), int(args.first_line or 1))])
        return match_quote(str(args.quote), source, float(args.threshold)).as_dict()
