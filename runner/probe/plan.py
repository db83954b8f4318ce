"""The items of a probe run: each original, then its perturbed copies, numbered in that order.

The plan is a pure function of the pipeline's probes and the input, so it is made again when
the run has ended to pair each copy's result with its original's (both in item order: one
original's results held at a time). A copy of an item field is made here; a copy of a step's
field carries the perturbation to the engine, which applies it once the step has run."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from runner.inputs import Item, ItemStream
from runner.pipeline.probes import Probe
from runner.text.perturb import Rewrite, get_path, perturbed, with_path

EXCERPT = 240


@dataclass(frozen=True)
class Planned:
    """One entry of the plan: an original (probe None), a copy, or a copy that could not be
    made (item None: the field held nothing the perturbation works on)."""

    item: Item | None
    original: int                      # the original's index in the run
    input_index: int                   # the original's number in the input
    probe: Probe | None = None
    variant: int = 0
    before: Any = None                 # the field's value, and the copy's (item fields only)
    after: Any = None


def plan(originals: Iterable[Item], probes: Sequence[Probe], items: int | None = None) -> Iterator[Planned]:
    """Every original (the first `items` when given) followed by its copies, numbered 1, 2, ..."""
    number = 0
    for item in itertools.islice(originals, items):
        number += 1
        original = number
        yield Planned(Item(number, item.value, item.parent, item.error, item.exploded_from), original, item.index)
        for probe in probes:
            for variant in range(probe.variants):
                copy, before, after = _copy(item, probe, variant, number + 1)
                if copy is not None:
                    number += 1
                yield Planned(copy, original, item.index, probe, variant, before, after)


def _copy(item: Item, probe: Probe, variant: int, number: int) -> tuple[Item | None, Any, Any]:
    """The copy (None: not made), and the field's value before and after (item fields only)."""
    if item.error:          # an item the input could not give: its copies error as it does (not "nothing to perturb")
        return Item(number, item.value, item.parent, item.error, item.exploded_from), None, None
    seed = f"{probe.name}|{variant}|{item.key}"
    if probe.step is not None:
        rewrite = Rewrite(probe.name, probe.step, probe.path, probe.kind, tuple(sorted(probe.options.items())),
                          variant, seed)
        return Item(number, item.value, item.parent, exploded_from=item.exploded_from, rewrites=(rewrite,)), None, None
    before = get_path(item.value, probe.path)
    after = perturbed(probe.kind, before, probe.options, variant, seed)
    if after is None:
        return None, before, None
    return Item(number, with_path(item.value, probe.path, after), item.parent, exploded_from=item.exploded_from), \
        before, after


def probe_items(probes: Sequence[Probe], items: int | None) -> Any:
    """ItemSource.derive for a probe run: the selected items and their copies."""
    def derive(selected: ItemStream) -> ItemStream:
        return ItemStream(lambda: (p.item for p in plan(selected, probes, items) if p.item is not None))
    return derive


def excerpt(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= EXCERPT else text[:EXCERPT - 3] + "..."
