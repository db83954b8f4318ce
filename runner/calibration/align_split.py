"""`runner align`'s split of the labelled items into train, dev and test: stratified by label,
grouped (a group never straddles two splits), seeded.

Each group (the items sharing a `--group-by` value; without one, each item alone) takes the
label most of its items have. Within each label the groups are shuffled with the seed, then
each in turn goes to the split furthest below its share of that label's items, so every
split holds each label in about the asked proportions and the same seed gives the same
split."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from runner.errors import InputError

SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class Labelled:
    key: str
    truth: str
    group: str
    rationale: str | None = None


@dataclass
class Split:
    train: list[Labelled] = field(default_factory=list)
    dev: list[Labelled] = field(default_factory=list)
    test: list[Labelled] = field(default_factory=list)

    def part(self, name: str) -> list[Labelled]:
        return {"train": self.train, "dev": self.dev, "test": self.test}[name]

    def keys(self, name: str) -> set[str]:
        return {item.key for item in self.part(name)}


def parse_ratios(text: str) -> tuple[float, float, float]:
    """`60/20/20` as shares of one; train, dev and test each above 0."""
    parts = text.split("/")
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        numbers = []
    if len(numbers) != 3 or any(n <= 0 for n in numbers):
        raise InputError(f"--split {text}: expected TRAIN/DEV/TEST, three positive numbers, e.g. --split 60/20/20")
    total = sum(numbers)
    return numbers[0] / total, numbers[1] / total, numbers[2] / total


def split_items(items: list[Labelled], ratios: tuple[float, float, float], seed: int) -> Split:
    groups: dict[str, list[Labelled]] = {}
    for item in items:
        groups.setdefault(item.group, []).append(item)
    strata: dict[str, list[str]] = {}
    for name in sorted(groups):
        label = sorted(Counter(i.truth for i in groups[name]).most_common(), key=lambda c: (-c[1], c[0]))[0][0]
        strata.setdefault(label, []).append(name)
    rng = random.Random(seed)
    split = Split()
    for label in sorted(strata):
        names = strata[label]
        rng.shuffle(names)
        total = sum(len(groups[n]) for n in names)
        held = [0, 0, 0]
        for name in names:
            deficits = [ratios[i] * total - held[i] for i in range(3)]
            chosen = max(range(3), key=lambda i: (deficits[i], -i))
            held[chosen] += len(groups[name])
            split.part(SPLITS[chosen]).extend(groups[name])
    return split
