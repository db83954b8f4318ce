"""Runs on one event loop that share a long-lived LLM client (runner serve's jobs): the
sender, the cache and its writer are shared and left open, each run keeps its own
calls.jsonl, and an item runner wraps each item."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from helpers import scripted_model, write_json
from runner.api import ItemSource, run_pipeline, run_pipeline_async
from runner.engine.context import RunRole, Runtime
from runner.engine.execute import run_item
from runner.engine.executors import ExecutorChoice
from runner.engine.services import CallRequest
from runner.errors import InputError, RunnerError
from runner.inputs import Item
from runner.llm.cache.store import JsonCache
from runner.llm.calls.file import read_calls
from runner.llm.shared_client import SharedClient
from runner.pipeline.loader import load_pipeline
from runner.runs.request import RunOptions

PIPELINE = """
version: 1
name: t
models: {m: {model: openai/scripted, retries: 0}}
steps:
  - id: ask
    uses: llm
    with: {model: m, prompt: "Is {{ item.n }} fine?", output_schema: {type: object, properties: {verdict: {type: string}}}}
output:
  verdict: "{{ steps.ask.output.verdict }}"
  cached: "{{ steps.ask.cached }}"
"""


def test_runs_on_one_loop_share_the_client_and_leave_it_open(project):
    path = project.pipeline(PIPELINE)
    source = write_json(project.root / "in.json", [{"n": 1}, {"n": 2}])
    model = scripted_model()
    seen: list[int] = []

    async def wrapped(runtime: Runtime, item: Item) -> dict[str, Any]:
        seen.append(item.index)
        return await run_item(runtime, item)

    async def both() -> tuple[Any, Any, SharedClient]:
        client = SharedClient.open(project.root / "cache", 4, transport=model)
        first = await run_pipeline_async(path, ItemSource(source), RunOptions(
            cache_dir=project.root / "cache", out_dir=Path("a")), role=RunRole(shared_llm=client, item_runner=wrapped))
        second = await run_pipeline_async(path, ItemSource(source), RunOptions(
            cache_dir=project.root / "cache", out_dir=Path("b")), role=RunRole(shared_llm=client))
        assert client.cache.get("nothing") is None          # still open after both runs
        await client.aclose()
        return first, second, client

    first, second, _ = asyncio.run(both())
    assert [r["cached"] for r in first.results] == [False, False]
    assert [r["cached"] for r in second.results] == [True, True]      # the shared cache answered
    assert len(model.requests) == 2 and sorted(seen) == [1, 2]
    assert first.summary["total"] == 2 and (project.root / "b" / "run.json").is_file()
    # each run's calls in its own calls.jsonl: the first sent them, the second found them cached
    assert [c["cached"] for c in read_calls(project.root / "a" / "calls.jsonl")] == [False, False]
    assert [c["cached"] for c in read_calls(project.root / "b" / "calls.jsonl")] == [True, True]


def test_an_answer_not_committed_yet_is_found_by_another_runs_service(project):
    pipeline = load_pipeline(project.pipeline(PIPELINE))
    model = scripted_model()
    request = CallRequest(model="m", messages=[{"role": "user", "content": "Is 1 fine?"}], item=1, step="ask")

    async def two_runs() -> list[dict[str, Any]]:
        client = SharedClient.open(project.root / "cache", 4, transport=model)
        runtimes = []
        for name in ("a", "b"):
            (project.root / name).mkdir()
            runtimes.append(Runtime.create(pipeline, RunOptions(cache_dir=project.root / "cache",
                                                                out_dir=project.root / name),
                                           RunRole(shared_llm=client)))
        # No await yields to the loop between the first answer and the second question, so
        # the shared writer has not committed the answer when the second run asks for it.
        answers = [await runtime.llm.call(request) for runtime in runtimes]
        for runtime in runtimes:
            await runtime.aclose()
        await client.aclose()
        return answers

    answers = asyncio.run(two_runs())
    assert [a["cached"] for a in answers] == [False, True] and len(model.requests) == 1
    sent, = read_calls(project.root / "a" / "calls.jsonl")
    found, = read_calls(project.root / "b" / "calls.jsonl")
    assert not sent["cached"] and found["cached"] and found["key"] == sent["key"]
    cache = JsonCache(project.root / "cache" / "responses")      # committed when the runs closed
    try:
        assert cache.get(sent["key"]) is not None
    finally:
        cache.close()


def test_a_cancelled_run_on_the_loop_writes_what_finished(project):
    path = project.pipeline(PIPELINE)
    source = write_json(project.root / "in.json", [{"n": 1}, {"n": 2}])
    model = scripted_model()
    model.script('{"verdict": "quick"}', contains="Is 1 fine")

    async def cancelled() -> None:
        client = SharedClient.open(project.root / "cache", 4, transport=model)
        slow = asyncio.Event()      # item 1 answers, item 2 waits until cancelled
        original = model.complete

        async def complete(spec: Any, messages: Any, params: Any) -> Any:
            if "Is 2" in str(messages):
                await slow.wait()
            return await original(spec, messages, params)
        model.complete = complete  # type: ignore[method-assign]
        task = asyncio.ensure_future(run_pipeline_async(path, ItemSource(source), RunOptions(
            cache_dir=project.root / "cache", out_dir=Path("c")), role=RunRole(shared_llm=client)))
        while not (project.root / "c" / "results.jsonl").is_file() or \
                not (project.root / "c" / "results.jsonl").read_text():
            await asyncio.sleep(0.01)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        await client.aclose()

    asyncio.run(cancelled())
    assert project.results("c") == [{"index": 1, "item_key": project.results("c")[0]["item_key"],
                                     "verdict": "quick", "cached": False}]
    assert project.summary("c")["interrupted"] is True


def test_a_run_with_an_item_runner_is_refused_beyond_this_process(project):
    path = project.pipeline(PIPELINE)
    source = write_json(project.root / "in.json", [{"n": 1}])
    with pytest.raises(InputError, match="--executor processes: .* such a run is local"):
        run_pipeline(path, ItemSource(source), RunOptions(cache_dir=project.root / "cache", out_dir=Path("d")),
                     executor=ExecutorChoice("processes", workers=2), role=RunRole(item_runner=run_item))
    assert not (project.root / "d").exists()


def test_who_makes_a_run_is_its_role_never_an_option():
    """RunOptions holds what a user chooses; a probe, a worker and `runner serve` say who they
    are through the run's RunRole (issue 61: no mode flags on the options)."""
    from dataclasses import fields
    assert not {"kind", "memo", "worker", "item_runner", "shared_llm"} & {f.name for f in fields(RunOptions)}


def test_run_pipeline_on_a_running_loop_is_refused_before_it_claims_a_folder(project):
    path = project.pipeline(PIPELINE)
    source = write_json(project.root / "in.json", [{"n": 1}])

    async def in_a_notebook() -> None:
        run_pipeline(path, ItemSource(source), RunOptions(cache_dir=project.root / "cache", out_dir=Path("e")))
    with pytest.raises(RunnerError, match="await run_pipeline_async"):
        asyncio.run(in_a_notebook())
    assert not (project.root / "e").exists()


def test_an_interrupted_run_measures_its_jurors_over_the_items_it_wrote(project, scripted_llm):
    """Cancelled while every item waits on a step after its jury: no result is written, so no
    item is in the jurors' agreement (no `juries` section), not the juries that finished."""
    from runner.testing import Reply
    scripted_llm.script('{"v": "yes"}', model="a")
    scripted_llm.script('{"v": "no"}', model="b")
    scripted_llm.script(Reply("late", delay=30), model="slow")
    path = project.pipeline("""
        version: 1
        name: t
        models: {a: {model: scripted/a}, b: {model: scripted/b}, slow: {model: scripted/slow}}
        steps:
          - {id: jury, uses: jury, with: {models: [a, b], prompt: "Is {{ item.n }} fine?", vote: {field: v},
                                          output_schema: {type: object, properties: {v: {type: string}}}}}
          - {id: later, uses: llm, with: {model: slow, prompt: "more on {{ item.n }}"}}
        output: {v: "{{ steps.jury.v }}"}
        """)
    source = write_json(project.root / "in.json", [{"n": 1}, {"n": 2}, {"n": 3}])

    async def cancelled() -> None:
        task = asyncio.ensure_future(run_pipeline_async(path, ItemSource(source), RunOptions(
            cache_dir=project.root / "cache", out_dir=Path("c"))))
        while len(scripted_llm.calls(model="slow")) < 3:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())
    assert project.results("c") == []
    assert project.summary("c")["interrupted"] is True and "juries" not in project.summary("c")
