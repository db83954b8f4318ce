"""Kinds of juror, as pure functions of a request: its prompt text and body in, the answer
out. The fake server plays one for a model (`fake.script(obedient, model="gullible")`), and
so can any scripted model that is handed a prompt and a body.

They read the citation judge's prompt (prompts/citation_judge.j2): the CITED TEXT with its
CONTEXT BEFORE and AFTER, the CLAIM BEING MADE and the QUOTE USED.

- `careful`: VALID when the quote is in the cited text (case and spacing aside) and every
  number the claim states is in the source; UNSUPPORTED otherwise. Instructions in the text
  it judges are text to it, the order of the context is nothing to it.
- `obedient`: does what the claim or the quote tells it (`... answer VALID`), else careful.
- `number_blind`: careful, but reads past numbers: a changed number goes unnoticed.
- `order_sensitive`: judges by the first context line it reads: MISLEADING when that line is
  longer than the last one, else careful. Reordering the context moves its verdict.
- `Noisy(seed)`: careful at temperature 0; at temperature > 0 any verdict, at random.

`token_logprobs` gives an answer's tokens with their logprobs, as a server that was asked
for `logprobs` sends them: each token almost certain, but the value of a named field."""

from __future__ import annotations

import json
import math
import random
import re
from typing import Any

VERDICTS = ("VALID", "MISLEADING", "INSUFFICIENT", "UNSUPPORTED")
NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                "twelve", "twenty", "thirty", "forty", "fifty", "hundred", "thousand")
NUMBER = re.compile(r"\d+(?:[.,]\d+)*|\b(?:" + "|".join(NUMBER_WORDS) + r")\b", re.IGNORECASE)
ORDER = re.compile(r"\b(?:answer|respond|return|mark|verdict)\b[^.\n]*?\b(" + "|".join(VERDICTS) + r")\b",
                   re.IGNORECASE)
SECTIONS = ("CONTEXT BEFORE:", "CITED TEXT:", "CONTEXT AFTER:", "CLAIM BEING MADE:", "QUOTE USED:", "Answer three")


def sections(prompt: str) -> dict[str, str]:
    """The citation judge prompt's parts, by heading (without its colon)."""
    found: dict[str, str] = {}
    for heading, following in zip(SECTIONS, SECTIONS[1:]):
        start = prompt.find(heading)
        end = prompt.find(following, start + 1)
        if start != -1:
            found[heading.rstrip(":")] = prompt[start + len(heading):end if end != -1 else None].strip()
    return found


def _plain(text: str) -> str:
    return " ".join(text.casefold().split())


def _answer(verdict: str, reason: str) -> str:
    return json.dumps({"verdict": verdict, "substantive_quote": True, "quote_in_context": verdict != "MISLEADING",
                       "supports_claim": verdict == "VALID", "reason": reason})


def _careful_verdict(parts: dict[str, str], strip_numbers: bool = False) -> tuple[str, str]:
    source = " ".join(parts.get(k, "") for k in ("CONTEXT BEFORE", "CITED TEXT", "CONTEXT AFTER"))
    quote, cited = parts.get("QUOTE USED", ""), parts.get("CITED TEXT", "")
    if strip_numbers:
        quote, cited, source = (NUMBER.sub("", text) for text in (quote, cited, source))
    if _plain(quote) not in _plain(cited):
        return "UNSUPPORTED", "The quote is not what the cited lines say."
    stated = {n.casefold() for n in NUMBER.findall(parts.get("CLAIM BEING MADE", ""))}
    missing = sorted(n for n in stated if n not in _plain(source)) if not strip_numbers else []
    if missing:
        return "UNSUPPORTED", f"The source never says {missing[0]}."
    return "VALID", "The cited lines say what the claim says."


def careful(prompt: str, body: dict[str, Any]) -> str:
    return _answer(*_careful_verdict(sections(prompt)))


def obedient(prompt: str, body: dict[str, Any]) -> str:
    parts = sections(prompt)
    order = ORDER.search(parts.get("CLAIM BEING MADE", "") + "\n" + parts.get("QUOTE USED", ""))
    if order:
        return _answer(order.group(1).upper(), "As instructed.")
    return careful(prompt, body)


def number_blind(prompt: str, body: dict[str, Any]) -> str:
    return _answer(*_careful_verdict(sections(prompt), strip_numbers=True))


def order_sensitive(prompt: str, body: dict[str, Any]) -> str:
    parts = sections(prompt)
    lines = [line for line in parts.get("CONTEXT BEFORE", "").splitlines() if line.strip()]
    if len(lines) > 1 and len(lines[0]) > len(lines[-1]):
        return _answer("MISLEADING", "The opening context changes the meaning.")
    return careful(prompt, body)


class Noisy:
    """Careful at temperature 0; at temperature > 0, a verdict drawn at random."""

    def __init__(self, seed: int = 0):
        self.random = random.Random(seed)

    def __call__(self, prompt: str, body: dict[str, Any]) -> str:
        if not float(body.get("temperature") or 0):
            return careful(prompt, body)
        return _answer(self.random.choice(VERDICTS), "Hard to say.")


TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


def token_logprobs(content: str, sure: dict[str, float] | None = None, rest: float = 0.99) -> list[dict[str, Any]]:
    """The answer's tokens as `choices[0].logprobs.content` holds them. Each token has
    probability `rest`, but the first token of the value of each field in `sure` (a JSON
    answer's top-level field), which has that probability (the value's other tokens 1.0)."""
    spans: dict[int, float] = {}
    following: set[int] = set()
    for name, probability in (sure or {}).items():
        found = re.search(r'"' + re.escape(name) + r'"\s*:\s*"?', content)
        if found:
            start = found.end()
            value = json.JSONDecoder().raw_decode(content, start - (1 if content[start - 1] == '"' else 0))[1]
            spans[start] = probability
            following.update(range(start + 1, value))
    tokens, position = [], 0
    for piece in TOKEN.findall(content):
        probability = spans.get(position, 1.0 if position in following else rest)
        tokens.append({"token": piece, "logprob": math.log(probability), "bytes": list(piece.encode()),
                       "top_logprobs": [{"token": piece, "logprob": math.log(probability)}]})
        position += len(piece)
    return tokens
