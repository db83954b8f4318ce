"""Progress on stderr: a live bar on a terminal, plain lines otherwise, none with --quiet."""

from __future__ import annotations

import io
import re

from rich.console import Console

from runner.engine.progress import CallCounts, LiveBar, PlainLines, Quiet, for_terminal
from runner.testing import Reply


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_display_suits_where_stderr_goes():
    assert isinstance(for_terminal(False, Tty()), LiveBar)
    assert isinstance(for_terminal(False, io.StringIO()), PlainLines)
    assert isinstance(for_terminal(True, Tty()), Quiet)


def test_plain_lines_during_a_real_run(project, scripted_llm, one_step):
    scripted_llm.script(Reply("fine", delay=0.1))
    project.prompt("p.j2", "Say {{ item.n }}\n")
    stream = io.StringIO()
    outcome = one_step("{id: ask, uses: llm, with: {model: m, prompt: p.j2}}", [{"n": n} for n in range(6)],
                       llm_concurrency=1, progress=PlainLines(stream, interval=0.05))
    assert len(outcome.results) == 6
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 3
    pattern = re.compile(r"^\[runner\] (\d)/6 items, LLM calls (\d+) sent, 0 cached, 0 failed, "
                         r"elapsed \d+:\d\d, ETA (\?|\d+:\d\d)$")
    assert all(pattern.match(line) for line in lines), [x for x in lines if not pattern.match(x)]
    assert any(pattern.match(line).group(2) != "0" for line in lines)     # calls counted while running


def test_live_bar_renders_items_and_calls():
    out = io.StringIO()
    bar = LiveBar(Console(file=out, force_terminal=True, width=120))
    bar.start(4, lambda: CallCounts(5, 2, 1))
    bar.advance()
    bar.stop()
    text = out.getvalue()
    assert "1/4" in text and "LLM calls 5 sent, 2 cached, 1 failed" in text


def test_quiet_cli_prints_no_progress(project, cli):
    path = project.pipeline("""
        version: 1
        name: q
        steps: [{id: s, uses: compute, with: {v: "{{ item.v }}"}}]
        output: {v: "{{ steps.s.v }}"}
        """)
    result = cli("run", str(path), "--record", "v=1", "--quiet")
    assert result.exit_code == 0 and result.stderr == ""
