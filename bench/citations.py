"""Citation extraction stays linear: hostile and large one-paragraph reports, each at two
sizes so the ratio shows the growth (2.0x for linear). Writes nothing; prints the table
recorded in bench/RESULTS.md.

    python bench/citations.py
"""

from __future__ import annotations

import time
from collections.abc import Callable

from runner.inputs.markdown_citations import extract_citations


def brackets(size: int) -> str:
    """'[a' repeated, no newline: backtracked quadratically through the old pattern."""
    return "[a" * (size // 2)


def citations(count: int) -> str:
    """`count` cited sentences in one paragraph (no blank line)."""
    return " ".join(f'Claim {n} says "quoted text {n}" here [doc{n % 7}.txt:L{n}-L{n + 2}](d.txt).'
                    for n in range(count))


def one_line(count: int) -> str:
    """`count` citations on one line with no sentence end: each claim cleaned the whole line."""
    return "See [a.txt:L1](a.txt) " * count


def one_paragraph(size: int) -> str:
    """A `size`-character paragraph of prose with a citation every ~500 characters."""
    sentence = "The committee reviewed the evidence, e.g. the minutes, and found no fault. "
    out, n = [], 0
    while sum(map(len, out)) < size:
        out.append(sentence * 6 + f"[minutes.txt:L{n}](m) ")
        n += 1
    return "".join(out)[:size]


def run(label: str, make: Callable[[int], str], sizes: tuple[int, int]) -> None:
    times = []
    for size in sizes:
        text = make(size)
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            found = extract_citations(text)
            best = min(best, time.perf_counter() - started)
        times.append(best)
        print(f"| {label} | {size:,} | {len(text):,} chars | {len(found):,} | {best * 1000:.0f} ms |")
    print(f"| {label} | ratio | | | {times[1] / times[0]:.2f}x for 2x input |")


def main() -> None:
    print("| input | size | text | items | best of 3 |")
    print("|---|---|---|---|---|")
    run("'[a' * n/2, no newline", brackets, (40_000, 80_000))
    run("citations in one paragraph", citations, (10_000, 20_000))
    run("citations on one line, no sentence end", one_line, (20_000, 40_000))
    run("one-paragraph report (chars)", one_paragraph, (500_000, 1_000_000))


if __name__ == "__main__":
    main()
