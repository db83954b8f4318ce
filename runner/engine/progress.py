"""Run progress on stderr: rich's live line on a terminal, a plain line every few seconds
otherwise, nothing with --quiet. Reads counters only; a run never waits on it."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TextIO


@dataclass
class CallCounts:
    sent: int = 0
    cached: int = 0
    failed: int = 0
    batches: str = ""          # each provider batch's state and counts, when the run batches

    def text(self) -> str:
        calls = f"LLM calls {self.sent} sent, {self.cached} cached, {self.failed} failed"
        return f"{calls}; {self.batches}" if self.batches else calls


Counter = Callable[[], CallCounts]


class Progress(Protocol):
    def start(self, total: int, counts: Counter) -> None: ...
    def advance(self) -> None: ...
    def stop(self) -> None: ...


class Quiet:
    """No display (--quiet)."""

    def start(self, total: int, counts: Counter) -> None: ...
    def advance(self) -> None: ...
    def stop(self) -> None: ...


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 \
        else f"{seconds // 60}:{seconds % 60:02d}"


def eta_text(done: int, total: int, elapsed: float, calls: CallCounts) -> str:
    """Time left, from uncached work only: a resumed run's cached items finish at once, so
    counting them as progress would promise the rest just as fast. With LLM calls: the time
    per call sent so far, times the calls an item makes, for every item left (each assumed
    uncached); without: the time per item. `?` until there is something to go by."""
    left, made = total - done, calls.sent + calls.cached
    if left <= 0:
        seconds: float | None = 0.0
    elif made:
        seconds = elapsed / calls.sent * (made / done) * left if calls.sent and done else None
    else:
        seconds = elapsed / done * left if done else None
    return "?" if seconds is None else _clock(seconds)


class PlainLines:
    """One line every `interval` seconds, from a background thread (no terminal codes)."""

    def __init__(self, stream: TextIO | None = None, interval: float = 5.0,
                 clock: Callable[[], float] = time.monotonic):
        self.stream = stream or sys.stderr
        self.clock = clock
        self.interval = interval
        self.total = self.done = 0
        self.counts: Counter = CallCounts
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0

    def start(self, total: int, counts: Counter) -> None:
        self.total, self.counts, self._started = total, counts, self.clock()
        self._thread = threading.Thread(target=self._loop, name="runner-progress", daemon=True)
        self._thread.start()

    def advance(self) -> None:
        self.done += 1

    def line(self) -> str:
        elapsed = self.clock() - self._started
        calls = self.counts()
        return (f"[runner] {self.done}/{self.total} items, {calls.text()}, "
                f"elapsed {_clock(elapsed)}, ETA {eta_text(self.done, self.total, elapsed, calls)}")

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.stream.write(self.line() + "\n")
            self.stream.flush()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


class LiveBar:
    """rich's progress display on stderr, refreshed by rich's own thread."""

    def __init__(self, console: Any = None):
        self.console = console
        self._progress: Any = None
        self._task: Any = None

    def start(self, total: int, counts: Counter) -> None:
        from rich import progress
        from rich.console import Console
        from rich.text import Text

        class Calls(progress.ProgressColumn):
            def render(self, task: Any) -> Text:
                return Text(counts().text(), style="cyan")

        class Remaining(progress.ProgressColumn):
            def render(self, task: Any) -> Text:
                return Text(eta_text(int(task.completed), int(task.total or 0), task.elapsed or 0.0, counts()),
                            style="cyan")

        self._progress = progress.Progress(
            progress.TextColumn("items"), progress.BarColumn(), progress.MofNCompleteColumn(), Calls(),
            progress.TimeElapsedColumn(), progress.TextColumn("ETA"), Remaining(),
            console=self.console or Console(stderr=True), refresh_per_second=4, transient=False)
        self._task = self._progress.add_task("items", total=total)
        self._progress.start()

    def advance(self) -> None:
        self._progress.advance(self._task)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()


def for_terminal(quiet: bool, stream: TextIO | None = None) -> Progress:
    """The display that suits where stderr goes."""
    if quiet:
        return Quiet()
    stream = stream or sys.stderr
    return LiveBar() if stream.isatty() else PlainLines(stream)
