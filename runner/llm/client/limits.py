"""Per-model limits: concurrency, requests per minute, and a daily budget kept on disk; and how
many requests a model server on this machine serves at once.

A server that says so is taken at its word (llama.cpp's reports its slots at /props and
/slots). Any other starts at one request at a time and adapts (AIMD): after a window of calls
at the current limit whose median latency held (within TOLERANCE of the level below's), one
more; a window whose latency grew (requests queue in the server) settles it one below; a
timeout, 429, 503 or a stream cut short halves it and settles it. The limit is said on stderr."""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import sys
import time
from collections import deque
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from runner.redact import redact

TOLERANCE = 1.5          # a window's median latency may grow this much before the server counts as full
MIN_WINDOW = 3           # calls per window, at least (and twice the limit)
PROBE_SECONDS = 2.0
OVERLOAD_STATUS = (429, 503)
RATE_WINDOW_SECONDS = 60.0
# The server counts arrivals, not our starts: a request that first opens a connection
# arrives later than one reusing a kept-alive one, so starts are spaced a little wider.
RATE_MARGIN = 0.05


def server_root(api_base: str) -> str:
    """http://host:port/v1 -> http://host:port: where llama.cpp's server answers /props."""
    parts = urlsplit(api_base)
    path = parts.path.rstrip("/")
    path = path[:-3] if path.endswith("/v1") else path
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def slots_in(path: str, data: object) -> int | None:
    if path == "/props" and isinstance(data, dict):
        slots = data.get("total_slots")
        return slots if isinstance(slots, int) and not isinstance(slots, bool) and slots >= 1 else None
    if path == "/slots" and isinstance(data, list) and data and all(isinstance(s, dict) for s in data):
        return len(data)
    return None


async def reported_slots(api_base: str) -> tuple[int, str] | None:
    """The slots the server reports, and where it said so; None when it does not say."""
    import aiohttp  # the HTTP transport's client; imported only when a local server is called

    root = server_root(api_base)
    timeout = aiohttp.ClientTimeout(total=PROBE_SECONDS)
    async with aiohttp.ClientSession(timeout=timeout, trust_env=False) as session:
        for path in ("/props", "/slots"):
            try:
                async with session.get(root + path, allow_redirects=False) as response:
                    if response.status != 200 or response.content_length and response.content_length > 1 << 20:
                        continue
                    data = json.loads(await response.content.read(1 << 20))
            except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
                continue
            slots = slots_in(path, data)
            if slots is not None:
                return slots, path
    return None


class AdaptiveLimit:
    """A semaphore for the models of one local endpoint whose limit is found while the run goes."""

    def __init__(self, endpoint: str, model_name: str, ceiling: int):
        self.endpoint = endpoint
        self.model_name = model_name
        self.ceiling = max(1, ceiling)
        self.limit = 1
        self.peak = 0                               # most requests on the wire at once so far
        self.on_wire = 0
        self.in_flight = 0
        self.settled = False
        self.said = False
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._window: list[float] = []
        self._below: float | None = None           # lowest median latency of a window that held
        self._probe: asyncio.Task[tuple[int, str] | None] | None = None

    def start_probe(self, api_base: str) -> None:
        self._probe = asyncio.ensure_future(reported_slots(api_base))

    async def _reported(self, probe: asyncio.Task[tuple[int, str] | None]) -> None:
        """Every call waits for the question's answer (the first request must not race it)."""
        try:
            found = await asyncio.shield(probe)
        except Exception:     # any failure of the question means the server does not say (a cancel is let through)
            found = None
        if self._probe is not probe:
            return            # another call already applied it
        self._probe = None
        if found is not None and not self.settled:
            slots, path = found
            capped = f"; the run sends at most {self.ceiling} at once (--concurrency)" if slots > self.ceiling else ""
            self._settle(min(slots, self.ceiling), f"it reports {slots} slot(s) at {path}{capped}")

    # -- the semaphore ------------------------------------------------------------------
    async def acquire(self) -> int:
        """Wait for a place; returns the limit in force, to pass back to `observe`."""
        if self._probe is not None:
            await self._reported(self._probe)
        if self.in_flight < self.limit and not self._waiters:
            self.in_flight += 1
            return self.limit
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()              # the place was given as the caller left
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise
        return self.limit

    def release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)

    # -- what the calls say ---------------------------------------------------------------
    @contextlib.contextmanager
    def sending(self) -> Iterator[None]:
        """One request on the wire; its latency is observed when it answers."""
        level, sent = self.limit, time.perf_counter()
        self.on_wire += 1
        self.peak = max(self.peak, self.on_wire)
        try:
            yield
        finally:
            self.on_wire -= 1
        self.observe(level, time.perf_counter() - sent)

    def observe(self, level: int, seconds: float) -> None:
        """A call sent while the limit was `level` answered in `seconds`."""
        if self.settled or level != self.limit:
            return
        self._window.append(seconds)
        if len(self._window) < max(MIN_WINDOW, 2 * level):
            return
        median = statistics.median(self._window)        # one slow answer must not decide
        self._window = []
        if self._below is not None and median > self._below * TOLERANCE:
            self._settle(level - 1, "its answers slowed when sent more at once")
        elif level >= self.ceiling:
            self._below = median
        else:
            self._below = median if self._below is None else min(self._below, median)
            self.limit = level + 1
            self._wake()

    def overloaded(self, why: str) -> None:
        """A timeout, 429, 503 or a stream cut short: halve the limit and keep it there."""
        if not self.settled:
            self._settle(max(1, self.limit // 2), why)
        elif self.limit > 1:
            self.limit = max(1, self.limit // 2)
            self._say(f"{why}; lowered")

    def _settle(self, limit: int, why: str) -> None:
        self.settled = True
        self.limit = max(1, limit)
        self._window = []
        self._say(why)
        self._wake()

    def _say(self, why: str, verb: str = "sending it") -> None:
        self.said = True
        sys.stderr.write(redact(f"runner: {self.endpoint} is on this machine: {verb} up to {self.limit} request(s) "
                                f"at a time ({why}; set models.{self.model_name}.limits.concurrency to choose)\n"))

    def finish(self) -> None:
        """At the run's end, say what was found if nothing was said yet."""
        if self._probe is not None:
            self._probe.cancel()
        if not self.said:
            self.limit = max(1, self.peak)
            if self.peak <= 1:
                why = "starting at 1, too few calls to try more"
            elif self.peak >= self.ceiling:
                why = f"found by adapting from 1: its answers kept their pace up to the run's {self.ceiling} in flight"
            else:
                why = "adapting from 1: the run ended before its limit was found"
            self._say(why, "sent it")


class BudgetSpent(Exception):
    pass


class RateWindow:
    """At most `per_minute` request starts in any 60-second window."""

    def __init__(self, per_minute: int):
        self.per_minute = per_minute
        self.window = RATE_WINDOW_SECONDS * (1 + RATE_MARGIN)
        self.starts: deque[float] = deque()
        self._lock = asyncio.Lock()

    async def wait(self) -> None:
        async with self._lock:
            while True:
                now = time.monotonic()
                while self.starts and now - self.starts[0] >= self.window:
                    self.starts.popleft()
                if len(self.starts) < self.per_minute:
                    self.starts.append(now)
                    return
                await asyncio.sleep(self.window - (now - self.starts[0]) + 0.001)


class DailyBudget:
    """Requests per day for one model, counted across runs in the cache folder."""

    def __init__(self, directory: Path):
        import diskcache
        self._store = diskcache.Cache(str(directory / "budgets"), eviction_policy="none")

    def spend(self, model_key: str, limit: int, shown: str) -> None:
        """Count one request, or raise BudgetSpent when today's budget is gone."""
        key = f"{model_key}|{date.today().isoformat()}"
        with self._store.transact():
            used = int(self._store.get(key, 0))
            if used >= limit:
                raise BudgetSpent(f"daily request budget of {limit} spent for {shown}")
            self._store.set(key, used + 1, expire=2 * 86400)

    def close(self) -> None:
        self._store.close()


class ModelGate:
    """The concurrency and rate limits of one model (the semaphore may be shared by the
    models of one local endpoint)."""

    def __init__(self, semaphore: asyncio.Semaphore | AdaptiveLimit | None, per_minute: int | None):
        self.semaphore = semaphore
        self.rate = RateWindow(per_minute) if per_minute else None

    async def __aenter__(self) -> None:
        if self.semaphore:
            await self.semaphore.acquire()

    async def pace(self) -> None:
        """Wait for the rate window; called last, right before the request is sent."""
        if self.rate:
            await self.rate.wait()

    async def __aexit__(self, *exc: object) -> None:
        if self.semaphore:
            self.semaphore.release()
