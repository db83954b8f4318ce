"""Compare quote_match with the seeds' difflib method: right answers on the shared case
set, and speed over 1k, 35k and 350k-character windows. Writes nothing; prints the
table recorded in bench/RESULTS.md.

    python bench/quote_match.py
"""

from __future__ import annotations

import random
import re
import sys
import time
from difflib import SequenceMatcher
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from quote_cases import CASES, CON, DEC, FED, MIT  # noqa: E402
from runner.text.quotes import match_quote  # noqa: E402


def seed_method(quote: str, source: str, threshold: float = 0.8) -> bool:
    """The seeds' step 2: normalise, longest common block / quote length."""
    def norm(text: str) -> str:
        return " ".join(re.sub(r"\[L\d+\]", "", text).lower().split())
    q, s = norm(quote), norm(source)
    if not q:
        return False
    block = SequenceMatcher(None, q, s).find_longest_match(0, len(q), 0, len(s))
    return block.size / len(q) >= threshold


def accuracy() -> list[str]:
    ours = sum(match_quote(c.quote, c.source).passed == c.passes for c in CASES)
    seed = sum(seed_method(c.quote, c.source) == c.passes for c in CASES)
    wrong_seed = [c.id for c in CASES if seed_method(c.quote, c.source) != c.passes]
    return [f"| right answers ({len(CASES)} cases) | {ours} | {seed} |",
            f"| seed method wrong on | | {', '.join(wrong_seed)} |"]


def corpus(size: int) -> str:
    lines = (CON + DEC + FED).splitlines()
    rng = random.Random(size)
    out: list[str] = []
    while sum(len(line) + 1 for line in out) < size:
        out.append(rng.choice(lines))
    text = "\n".join(out)[: size - len(MIT) - 1]
    return text + "\n" + MIT


def timed(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def speed() -> list[str]:
    rows = []
    exact = "The above copyright notice and this permission notice shall be included in all copies"
    typo = "The above copyrihgt notice and this permision notice shall be included in all copies"
    for size in (1_000, 35_000, 350_000):
        text = corpus(size)
        repeat = 5 if size < 100_000 else 2
        for label, quote in (("exact", exact), ("2 typos", typo)):
            ours = timed(lambda q=quote, t=text: match_quote(q, t), repeat)
            seed = timed(lambda q=quote, t=text: seed_method(q, t), repeat)
            rows.append(f"| {size:,} chars, {label} | {ours * 1000:.1f} ms | {seed * 1000:.1f} ms | "
                        f"{seed / ours:.1f}x |")
    return rows


def main() -> None:
    print("| measure | quote_match | seed difflib |\n|---|---|---|")
    print("\n".join(accuracy()))
    print("\n| window | quote_match | seed difflib | seed / ours |\n|---|---|---|---|")
    print("\n".join(speed()))


if __name__ == "__main__":
    main()
