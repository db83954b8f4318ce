"""The result store of `runner serve`: one suite, run on SQLite and on a real PostgreSQL
server (RUNNER_TEST_POSTGRES_DSN; CI starts one and sets RUNNER_REQUIRE_POSTGRES)."""

from __future__ import annotations

import threading
import time

import pytest

from runner.serve.app import open_result_store
from runner.stores.database import CHUNK, StoreUnavailable
from runner.stores.result_store import ResultStore
from serve_fixtures import BACKENDS, backend_url


@pytest.fixture(params=BACKENDS)
def store(request, tmp_path):
    url = backend_url(request.param, tmp_path)
    opened = open_result_store(url, tmp_path / "unused.sqlite")
    opened.test_url = url           # to open it again
    yield opened
    opened.close()


def test_a_result_is_kept_by_pipeline_hash_and_key(store):
    assert store.get("p", "h1", "k") is None
    stored = store.put("p", "h1", "k", {"rating": "green", "text": "naïve ✓", "n": [1, 2.5, None]})
    found = store.get("p", "h1", "k")
    assert found == stored and found.result == {"rating": "green", "text": "naïve ✓", "n": [1, 2.5, None]}
    assert found.stored_at.endswith("+00:00")
    assert store.get("p", "h2", "k") is None and store.get("q", "h1", "k") is None


def test_a_second_put_replaces_the_first(store):
    store.put("p", "h", "k", {"v": 1})
    time.sleep(0.002)
    second = store.put("p", "h", "k", {"v": 2})
    assert store.get("p", "h", "k").result == {"v": 2} and store.get("p", "h", "k").stored_at == second.stored_at
    assert store.count("p") == 1


def test_many_keys_at_once(store):
    keys = [f"k{i}" for i in range(CHUNK + 20)]
    for key in keys[::2]:
        store.put("p", "h", key, {"key": key})
    found = store.get_many("p", "h", [*keys, "k0"])
    assert sorted(found) == sorted(keys[::2]) and found["k2"].result == {"key": "k2"}
    assert sorted(s.item_key for s in store.of_pipeline("p", "h")) == sorted(keys[::2])
    assert store.count("p") == len(keys[::2])


def test_many_results_put_at_once_replace_by_key_and_the_last_of_a_key_wins(store):
    store.put("p", "h", "k0", {"v": "old"})
    stored = store.put_many("p", "h", [(f"k{i}", {"v": i}) for i in range(CHUNK + 20)] + [("k1", {"v": "last"})])
    assert len(stored) == CHUNK + 21 and len({entry.stored_at for entry in stored}) == 1
    assert store.count("p") == CHUNK + 20
    assert store.get("p", "h", "k0").result == {"v": 0} and store.get("p", "h", "k1").result == {"v": "last"}
    assert store.put_many("p", "h", []) == []


def test_what_is_stored_is_there_for_a_new_connection(store, tmp_path):
    store.put("p", "h", "k", {"v": "kept"})
    again = open_result_store(store.test_url, tmp_path / "unused.sqlite")
    try:
        assert again.get("p", "h", "k").result == {"v": "kept"}
    finally:
        again.close()


def test_threads_write_at_once_and_lose_nothing(store):
    def write(n: int) -> None:
        for i in range(20):
            store.put("p", "h", f"{n}-{i}", {"n": n, "i": i})
    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.count("p") == 80
    store.ping()


def test_an_unreachable_postgres_is_unavailable_not_a_crash():
    started = time.monotonic()
    store = ResultStore.postgres("postgresql://judge:hunter2-secret-pw@127.0.0.1:1/results")
    with pytest.raises(StoreUnavailable) as refused:
        store.get("p", "h", "k")
    assert "hunter2-secret-pw" not in str(refused.value) and "cannot be reached" in str(refused.value)
    assert time.monotonic() - started < 30
    store.close()


def test_an_sqlite_store_that_cannot_be_opened_says_where(tmp_path):
    (tmp_path / "folder.sqlite").mkdir()
    with pytest.raises(StoreUnavailable, match="folder.sqlite"):
        open_result_store(str(tmp_path / "folder.sqlite"), tmp_path / "x")
