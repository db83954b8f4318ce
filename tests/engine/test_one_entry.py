"""Every way items run goes through the engine's one entry (issue 61): `runner render` runs the
items a run runs, and a run leaves the caller's RunOptions as given."""

from __future__ import annotations

import io
import json
from dataclasses import replace

from runner.api import ItemSource, render_pipeline, run_pipeline
from runner.engine.context import RunRole
from runner.runs.request import RunOptions

PIPELINE = """
version: 1
name: t
models: {m: {model: scripted/m, retries: 0}}
memo: {key: "{{ item.n }}"}
steps:
  - id: ask
    uses: llm
    with: {model: m, prompt: "Is {{ item.n }} fine?"}
output:
  n: "{{ item.n }}"
"""


def test_a_run_leaves_the_callers_options_as_given(project, scripted_llm):
    path = project.pipeline(PIPELINE)
    source = project.root / "in.jsonl"
    source.write_text('{"n": 1}\n{"n": 2}\n', encoding="utf-8")
    options = RunOptions(cache_dir=project.root / "cache")
    given = replace(options)
    first = run_pipeline(path, ItemSource(source), options)
    assert options == given                      # no run folder, memo folder or input written into them
    second = run_pipeline(path, ItemSource(source), options)
    assert options == given
    assert first.out_dir != second.out_dir       # the same options make a new run folder each time
    assert first.out_dir.parent == second.out_dir.parent
    assert json.loads((second.out_dir / "summary.json").read_text())["memo"]["reused"] == 2


def test_render_runs_the_items_a_run_runs(project, scripted_llm):
    path = project.pipeline(PIPELINE)
    source = project.root / "in.jsonl"
    source.write_text('{"n": 1}\nnot json\n{"n": 3}\n{"n": 4}\n', encoding="utf-8")
    seen: list[int] = []
    options = RunOptions(cache_dir=project.root / "cache")

    async def watched(runtime, item):
        from runner.engine.execute import run_item
        seen.append(item.index)
        return await run_item(runtime, item)
    outcome = run_pipeline(path, ItemSource(source, limit=3), options, role=RunRole(item_runner=watched))
    stream = io.StringIO()
    render_pipeline(path, ItemSource(source, limit=3), options, stream)
    rendered = [int(line.split()[2]) for line in stream.getvalue().splitlines() if line.startswith("=== item")]
    assert rendered == seen == sorted(r["index"] for r in outcome.results)
    assert "(item error:" in stream.getvalue()        # the unreadable line is an item of both, with its error


def test_render_of_one_item_leaves_the_callers_source_as_given(project, scripted_llm):
    path = project.pipeline(PIPELINE)
    source_file = project.root / "in.jsonl"
    source_file.write_text('{"n": 1}\n{"n": 2}\n', encoding="utf-8")
    source, stream = ItemSource(source_file), io.StringIO()
    render_pipeline(path, source, RunOptions(cache_dir=project.root / "cache"), stream, item_number=2)
    assert "=== item 2 ===" in stream.getvalue() and "=== item 1 ===" not in stream.getvalue()
    assert source.selection.item is None            # the same source then runs every item
