"""Big runs in bounded memory: the engine's window, results.jsonl put in order on disk, the
lazy results view that summaries, exports and selections read."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from helpers import run, write_json
from runner.engine.execute import WINDOW_AHEAD, Runtime, run_items
from runner.inputs import Item
from runner.pipeline.loader import load_pipeline
from runner.runs import results_file
from runner.runs.request import RunOptions
from runner.runs.results_file import ResultsView, rewrite_in_order

SLOW_FIRST = """
    version: 1
    name: window
    steps:
      - {id: wait, uses: compute, with: {n: "{{ item.n }}"}}
    output: {n: "{{ steps.wait.n }}"}
    summary:
      count_by: n
      fields:
        seen: "{{ results | length }}"
        big: "{{ results | selectattr('n', 'gt', 2) | length }}"
        first: "{{ results[0].n }}"
    """


def test_the_window_takes_items_only_as_it_has_room(project, monkeypatch):
    pipeline = load_pipeline(project.pipeline(SLOW_FIRST))
    runtime = Runtime.create(pipeline, RunOptions(cache_dir=project.root / "cache"))
    taken = finished = 0
    ahead: list[int] = []
    in_flight: list[int] = []
    import runner.engine.execute as engine
    real = engine.run_item

    async def slow_first(rt, item):
        await asyncio.sleep(0.2 if item.index == 1 else 0)       # the first item holds the window back
        return await real(rt, item)
    monkeypatch.setattr(engine, "run_item", slow_first)

    def items():
        nonlocal taken
        for n in range(1, 501):
            taken += 1
            ahead.append(taken - finished)
            yield Item(n, {"n": n})

    def done(position, result):
        nonlocal finished
        finished += 1
        in_flight.append(runtime.in_flight.count)

    count = asyncio.run(run_items(runtime, items(), 4, done))
    assert count == finished == 500 and runtime.in_flight.count == 0
    assert max(in_flight) <= 4 and max(ahead) <= 4 * WINDOW_AHEAD        # never the whole input at once


def test_results_are_put_in_input_order_by_an_external_merge(tmp_path, monkeypatch):
    monkeypatch.setattr(results_file, "RUN_LINES", 7)                      # many runs on disk
    monkeypatch.setattr(results_file, "RUN_CHARS", 200)                    # some cut by their size
    path = tmp_path / "results.jsonl"
    indexes = list(range(1, 101))
    random.Random(4).shuffle(indexes)
    path.write_text("".join(json.dumps({"index": i, "v": f"x{i}"}) + "\n" for i in indexes))
    rewrite_in_order(path)
    lines = path.read_text().splitlines()
    assert [json.loads(line)["index"] for line in lines] == list(range(1, 101))
    assert json.loads(lines[41]) == {"index": 42, "v": "x42"}
    assert [p.name for p in tmp_path.iterdir()] == ["results.jsonl"]      # no spill file left


def test_the_results_view_reads_like_a_list(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"index": 1, "a": 1}\n\n{"index": 2, "a": 2}\n{"index": 3, "a"')   # a cut last line
    view = ResultsView(path)
    assert list(view) == [{"index": 1, "a": 1}, {"index": 2, "a": 2}] and list(view) == list(view)
    assert len(view) == 2 and view[1] == {"index": 2, "a": 2} and view[-1]["a"] == 2 and view[:1] == [view[0]]
    assert view == [{"index": 1, "a": 1}, {"index": 2, "a": 2}] and bool(view)
    assert not ResultsView(tmp_path / "missing.jsonl") and len(ResultsView(tmp_path / "missing.jsonl")) == 0


def test_summary_fields_see_results_as_a_lazy_view(project):
    path = project.pipeline(SLOW_FIRST)
    outcome = run(path, write_json(project.root / "in.json", [{"n": n} for n in (3, 1, 4, 1, 5)]))
    summary = outcome.summary
    assert (summary["seen"], summary["big"], summary["first"], summary["total"]) == (5, 3, 3, 5)
    assert summary["counts"] == {"3": 1, "1": 2, "4": 1, "5": 1}
    assert isinstance(outcome.results, ResultsView)                         # RunOutcome.results: the file
    assert [r["n"] for r in outcome.results] == [3, 1, 4, 1, 5]


def test_failed_from_a_killed_run_reads_its_unordered_results(project, cli):
    path = project.pipeline("""
        version: 1
        name: sel
        steps: [{id: s, uses: compute, with: {ok: "{{ item.ok }}"}}]
        output: {ok: "{{ steps.s.ok }}"}
        summary: {rates: {pass_rate: "result.ok"}}
        """)
    source = write_json(project.root / "in.json", [{"ok": n % 3 != 0} for n in range(1, 31)])
    killed = project.root / "killed"
    killed.mkdir()
    finished = list(range(1, 21))
    random.Random(2).shuffle(finished)                                     # in finishing order, as appended
    (killed / "results.jsonl").write_text(
        "".join(json.dumps({"index": n, "ok": n % 3 != 0}) + "\n" for n in finished))
    (killed / "summary.json").write_text("{}")
    done = cli("run", str(path), "--input", str(source), "--out", "again", "--failed-from", str(killed), "--quiet")
    assert done.exit_code == 0, done.stderr
    # the six failed items ran again, merged into a complete view of the killed run (issue 32's rerun)
    assert [r["index"] for r in project.results("again")] == list(range(1, 21))
    assert json.loads((project.root / "again" / "summary.json").read_text())["rerun_items"] == 6


def test_a_json_lines_file_is_read_as_the_run_takes_it(tmp_path):
    from runner.inputs import iter_records
    path = tmp_path / "in.json"
    path.write_text('{"a": 1}\n{"a": 2}\nnot json\n')
    records = iter_records("json", path, {})
    assert not isinstance(records, list)                                   # a generator, not a list
    first = next(iter(records))
    assert first.value == {"a": 1}
    assert [(r.value, bool(r.error)) for r in iter_records("json", path, {})] == [
        ({"a": 1}, False), ({"a": 2}, False), ({"line": 3}, True)]


def random_reports(count: int) -> list[str]:
    """`count` random texts built of the pieces a markdown report splits on (seeded: the same each run)."""
    pieces = ["a", "b ", " ", "\n", "\n", "\r", "#", "##", "-", "1", ".", ")", ">", "\x0b", "\u2028", "\x85",
              "\t", "[f.txt:L1](x)", "+ ", "\ufeff", "Quote \"so it is\" [g:L2-L3](y). "]
    rng = random.Random(7)
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 40))) for _ in range(count)]


# The 3,000 random texts in six slices of 500: the first in the default run, the other five under
# `-m slow` (the same code path on more random texts: 2 s of CPU the default run need not spend).
@pytest.mark.parametrize("first", [0, *(pytest.param(first, marks=pytest.mark.slow) for first in range(500, 3000, 500))])
def test_a_report_read_line_by_line_splits_as_the_whole_text_does(tmp_path, first):
    from runner.inputs import iter_records
    from runner.inputs.markdown_citations import extract_citations, file_blocks, text_blocks
    path = tmp_path / "r.md"
    for text in random_reports(3000)[first:first + 500]:
        path.write_bytes(text.encode())
        text = text.removeprefix("\ufeff")                     # a leading BOM is dropped, as it always was
        assert list(file_blocks(path)) == list(text_blocks(text)), repr(text)
        records = list(iter_records("markdown_citations", path, {}))
        expected = extract_citations(text)
        assert [r.value for r in records] == [{k: v for k, v in c.items() if k != "error"} for c in expected]
