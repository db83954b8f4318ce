"""What a run reads: its items, as a stream from the input (`load_items`), and what the
pipeline's templates read of them (its steps, output, memo and prompt files): the item's
fields, and with `explode` the record's (`parent_as`), with `namespaces` each namespace's.
`runner serve` lists them (GET /v1/pipelines); an exploded item's key keeps the list it is one
element of when the pipeline reads that list (runner/inputs: Item.key)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jinja2 import nodes

from runner.engine.selection import select
from runner.errors import InputError
from runner.inputs import Item, ItemStream, iter_items, iter_records, record_counter, record_from_pairs
from runner.inputs.csv import cell_reader
from runner.inputs.stdin import STDIN_NAME, is_stdin, spool
from runner.pipeline.model import Pipeline
from runner.runs.manifest import strings_in, used_files
from runner.runs.request import ItemSource
from runner.templating.sandbox import attribute_refs, find_all, parse_source

WHOLE = "*"      # a name read whole (`deck | tojson`) or by a key computed at render time


def load_items(pipeline: Pipeline, source: ItemSource) -> ItemStream:
    """The run's items as a stream read from the input as the run takes them (each pass reads it again)."""
    if source.records and source.input_path:
        raise InputError("give either --input or --record, not both")
    if source.records:
        cells = cell_reader(pipeline.input.options) if pipeline.adapter == "csv" else None
        items = ItemStream.of([Item(1, record_from_pairs(source.records, cells))])
    elif source.input_path:
        spool_stdin(source)              # `--input -`: read from a copy of standard input, made once
        path, explode = source.stdin_copy or source.input_path or Path(), pipeline.input.explode
        keyed = reads_exploded_list(pipeline)          # an exploded item's key keeps the list it reads
        adapter, options = pipeline.adapter, pipeline.input.options
        if source.input_format and source.input_format != adapter:      # the pipeline's options are its adapter's
            adapter, options = source.input_format, {}
        shown = STDIN_NAME if source.stdin_copy is not None else source.input_name     # a copy, as the user knows it
        records = iter_records(adapter, path, options, shown)       # an unusable input fails here
        if isinstance(records, list):         # read whole anyway (a JSON array, YAML): read once
            items = ItemStream(lambda: iter_items(records, explode, keyed))
        else:
            counter = None if explode else record_counter(adapter)     # exploded records: counted by a pass
            items = ItemStream(lambda: iter_items(iter_records(adapter, path, options, shown), explode, keyed),
                               count=None if counter is None else lambda: counter(path, options))
    else:
        raise InputError("no input: give --input PATH or --record KEY=VALUE")
    source.input_items = len(items)
    selected = select(pipeline, items, source.selection, source.limit)
    return source.derive(selected) if source.derive is not None else selected


def spool_stdin(source: ItemSource) -> None:
    """`--input -`: standard input copied once, now; whoever made the copy removes it (a run, `runner probe`)."""
    if is_stdin(source.input_path) and source.stdin_copy is None:
        source.stdin_copy = spool(sys.stdin)


def input_reads(pipeline: Pipeline, names: dict[str, set[str]] | None = None) -> dict[str, Any]:
    """The input fields the pipeline's templates read (`names`: template_reads, when already
    read), as GET /v1/pipelines describes them."""
    spec = pipeline.input
    names = template_reads(pipeline) if names is None else names
    described: dict[str, Any] = {"adapter": pipeline.adapter}
    if spec.namespaces:     # a record is a mapping of these names (e.g. an OpenAI Evals row's item and sample)
        described["namespaces"] = {name: sorted(names[name] - {WHOLE}) for name in spec.namespaces}
    elif spec.explode:
        described["explode"] = spec.explode
        described["record_fields"] = sorted({*names.get(spec.parent_as or "", set()), spec.explode} - {WHOLE})
        described["item_fields"] = sorted(names["item"] - {WHOLE})
    else:
        described["fields"] = sorted(names["item"] - {WHOLE})
    return described


def reads_exploded_list(pipeline: Pipeline, names: dict[str, set[str]] | None = None) -> bool:
    """Whether an exploded item depends on the list it is one element of: a template reads the
    record's `explode` field, or the whole record (`parent_as`)."""
    spec = pipeline.input
    if not spec.explode or not spec.parent_as:
        return False
    read = (template_reads(pipeline) if names is None else names)[spec.parent_as]
    return spec.explode in read or WHOLE in read


def template_reads(pipeline: Pipeline) -> dict[str, set[str]]:
    """Per input name (item, the record's, each namespace), the fields templates read of it
    (its prompt files read once)."""
    spec = pipeline.input
    names: dict[str, set[str]] = {"item": set(), **{n: set() for n in (spec.parent_as, *spec.namespaces) if n}}
    for text in _template_texts(pipeline):
        for bare in (False, True):
            try:
                tree = parse_source(text, bare)
            except Exception:  # noqa: BLE001 - not a template of this kind
                continue
            for root, found in names.items():
                found.update(attribute_refs(tree, root))
                if _read_whole(tree, root):
                    found.add(WHOLE)
    return names


def _read_whole(tree: nodes.Node, root: str) -> bool:
    """`root` used other than as `root.X` or `root['X']`: passed whole, or read by a computed key."""
    uses = sum(1 for node in find_all(tree, (nodes.Name,)) if node.name == root)
    named = sum(1 for node in find_all(tree, (nodes.Getattr, nodes.Getitem))
                if isinstance(node.node, nodes.Name) and node.node.name == root
                and (isinstance(node, nodes.Getattr) or isinstance(node.arg, nodes.Const)))
    return uses > named


def _template_texts(pipeline: Pipeline) -> Iterator[str]:
    for part in ("steps", "output", "output_base", "memo"):
        yield from strings_in(pipeline.located.data.get(part))
    for name in used_files(pipeline):
        if name.startswith("prompts/"):
            try:
                yield (pipeline.project_dir / name).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
