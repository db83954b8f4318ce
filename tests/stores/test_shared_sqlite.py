"""Stores that several runs share (memo, reviews, batches): runs creating one at the same
moment all open it (runner/stores/database.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from runner.llm.batch.store import BatchStore
from runner.stores.memo import MemoStore
from runner.stores.reviews import ReviewStore

pytestmark = pytest.mark.slow

OPENERS: dict[str, Callable[[Path], MemoStore | ReviewStore | BatchStore]] = {
    "memo": MemoStore,
    "reviews": ReviewStore,
    "batches": lambda path: BatchStore(path.parent / path.stem),
}


@pytest.mark.parametrize("store", OPENERS)
def test_runs_creating_one_store_at_the_same_moment_all_open_it(tmp_path, store):
    # Each reads the new file, then wants it to itself to switch it to WAL: SQLite answers
    # "locked" at once there (waiting could deadlock); it was seen in about one round in 40.
    opener, failures = OPENERS[store], []
    for round_ in range(150):
        path = tmp_path / f"store{round_}.sqlite"
        barrier = threading.Barrier(6)

        def open_store(path: Path = path, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            try:
                opened = opener(path)
            except Exception as exc:      # noqa: BLE001 - each failure is what the test reports
                failures.append(exc)
            else:
                opened.close()

        threads = [threading.Thread(target=open_store) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []
