"""The log process (runner/llm/log_process.py, log_worker.py): a run's call logs past the
first SPOOL_AFTER are written by a process of their own, which names them all at the end;
what it writes equals what the run writes itself, and when it cannot start or ends early
the run writes and names them."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from helpers import run, write_json
from runner.llm import log_process, logs
from runner.llm.log_process import LogProcess
from runner.llm.logs import CallLogWriter, pending_name

ITEMS = 24


def _pipeline(project):
    project.prompt("ask.j2", "Question {{ item.q }}\n")
    return project.pipeline("""
        version: 1
        name: spool
        env: [FAKE_URL]
        models:
          m: {model: openai/m1, api_base: "{{ env.FAKE_URL }}", backoff: 0.01}
          n: {model: openai/m2, api_base: "{{ env.FAKE_URL }}", backoff: 0.01}
        steps:
          - {id: a, uses: llm, with: {model: m, prompt: ask.j2}}
          - {id: b, uses: llm, with: {model: n, prompt: ask.j2}}
        output:
          a: "{{ steps.a.output }}"
        """)


def _logs(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


@pytest.fixture
def counted_here(monkeypatch):
    """How many logs this process wrote itself (the log process's are not counted)."""
    written: list[str] = []
    real = logs.write_pending

    def counting(folder: int, name: str, body: bytes) -> None:
        written.append(name)
        real(folder, name, body)
    monkeypatch.setattr(logs, "write_pending", counting)
    return written


def test_the_log_process_writes_and_names_what_the_run_would_have(project, fake_llm, monkeypatch, counted_here):
    monkeypatch.setenv("FAKE_URL", fake_llm.url)
    fake_llm.answer_json({"verdict": "yes"})
    path = _pipeline(project)
    items = write_json(project.root / "in.json", [{"q": n} for n in range(ITEMS)])
    monkeypatch.setattr(logs, "SPOOL_AFTER", 10**9)
    run(path, items, out="here")
    assert len(counted_here) == 2 * ITEMS
    counted_here.clear()
    monkeypatch.setattr(logs, "SPOOL_AFTER", 5)
    run(path, items, out="spooled")
    assert len(counted_here) == 5                       # the rest went to the log process
    here, spooled = project.root / "here" / "llm_logs", project.root / "spooled" / "llm_logs"
    assert _logs(spooled) == _logs(here)
    assert len(_logs(spooled)) == 2 * ITEMS and "m_0024_item24.txt" in _logs(spooled)
    assert not (spooled / ".pending").exists()
    report = (project.root / "spooled" / "report.html").read_text()
    assert 'href="llm_logs/n_0024_item24.txt"' in report      # the report names the logs by their final names


def test_a_log_process_that_cannot_start_leaves_the_logs_to_the_run(project, fake_llm, monkeypatch, counted_here):
    monkeypatch.setenv("FAKE_URL", fake_llm.url)
    fake_llm.answer_json({"verdict": "yes"})
    monkeypatch.setattr(logs, "SPOOL_AFTER", 3)
    monkeypatch.setattr(log_process, "module_command", lambda *args: [str(project.root / "no-such-python")])
    run(_pipeline(project), write_json(project.root / "in.json", [{"q": n} for n in range(ITEMS)]))
    assert len(counted_here) == 2 * ITEMS
    assert len(_logs(project.root / "out" / "llm_logs")) == 2 * ITEMS


def _writer(tmp_path: Path) -> CallLogWriter:
    return CallLogWriter(tmp_path / "llm_logs")


def test_logs_sent_are_written_then_named_when_the_stream_ends(tmp_path, monkeypatch):
    monkeypatch.setattr(logs, "SPOOL_AFTER", 0)
    writer = _writer(tmp_path)

    async def scenario() -> None:
        for item in (2, 1, 3):
            assert writer.spooled(pending_name(item, 1, "m"), f"log of {item}".encode())
        naming = writer.end()
        assert naming is not None
        await naming
    asyncio.run(scenario())
    folder = tmp_path / "llm_logs"
    assert _logs(folder) == {"m_0001_item1.txt": b"log of 1", "m_0002_item2.txt": b"log of 2",
                             "m_0003_item3.txt": b"log of 3"}
    assert not (folder / ".pending").exists()


def test_a_stream_cut_short_leaves_the_written_logs_under_their_provisional_names(tmp_path):
    writer = _writer(tmp_path)
    pending = writer.pending

    async def scenario() -> int:
        process = LogProcess(os.open(pending, os.O_RDONLY | os.O_DIRECTORY),
                             os.open(tmp_path / "llm_logs", os.O_RDONLY | os.O_DIRECTORY))
        process.send(pending_name(1, 1, "m"), b"one")
        process.send(pending_name(2, 1, "m"), b"two")
        await asyncio.sleep(0)
        await asyncio.wait([process._connecting])
        assert process._transport is not None
        process._transport.close()                  # as when runner dies: no end frame
        await process._ended
        return process._process.wait()
    assert asyncio.run(scenario()) == 1
    assert sorted(p.name for p in pending.iterdir()) == [pending_name(1, 1, "m"), pending_name(2, 1, "m")]
    assert not list((tmp_path / "llm_logs").glob("m_*"))


def test_a_name_that_is_not_a_log_s_is_refused_and_the_others_are_written(tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(logs, "SPOOL_AFTER", 0)
    writer = _writer(tmp_path)

    async def scenario() -> None:
        assert writer.spooled("../../escaped.txt", b"outside")
        assert writer.spooled(pending_name(1, 1, "m"), b"inside")
        naming = writer.end()
        assert naming is not None
        await naming
    asyncio.run(scenario())
    assert _logs(tmp_path / "llm_logs") == {"m_0001_item1.txt": b"inside"}
    assert not (tmp_path / "escaped.txt").exists()
    assert "some call logs could not be written (ValueError: not a provisional log name" in capfd.readouterr().err


def test_a_log_process_that_ends_early_leaves_naming_to_the_run(tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(logs, "SPOOL_AFTER", 1)
    monkeypatch.setattr(log_process, "module_command", lambda *args: [sys.executable, "-c", "raise SystemExit(3)"])
    writer = _writer(tmp_path)

    async def scenario() -> None:
        assert not writer.spooled(pending_name(1, 1, "m"), b"one")      # the first: written here
        writer.put(pending_name(1, 1, "m"), b"one")
        writer.spooled(pending_name(2, 1, "m"), b"two")                 # the process starts, and ends
        spool = writer._spool
        assert spool is not None
        await spool._ended
        assert not writer.spooled(pending_name(3, 1, "m"), b"three")    # it is gone: written here
        writer.put(pending_name(3, 1, "m"), b"three")
        naming = writer.end()
        assert naming is not None
        await naming
    asyncio.run(scenario())
    assert _logs(tmp_path / "llm_logs") == {"m_0001_item1.txt": b"one", "m_0002_item3.txt": b"three"}
    assert "the log process ended (exit code 3): some call logs may be missing" in capfd.readouterr().err
