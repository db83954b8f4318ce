"""The JSON cache (runner/llm/cache/store.py): values round-trip through diskcache, many in
one transaction; what another process stores is seen; an unreadable entry is asked again."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from runner.llm.cache.store import CacheUnusable, JsonCache, open_caches
from runner.pipeline.loader import load_pipeline

REPO = Path(__file__).resolve().parents[2]


def digest(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


def test_an_entry_holding_what_json_data_may_not_is_read_back_as_written(tmp_path):
    """A model's -inf logprob or a NaN vector is cached as Python writes it: reading it back as
    data a person wrote (no NaN, no Infinity) missed it on every rerun."""
    import math
    cache = JsonCache(tmp_path / "responses")
    cache.set(digest(1), {"logprobs": [float("-inf")], "vector": [float("nan")]})
    found = cache.get(digest(1))
    assert found["logprobs"] == [float("-inf")] and math.isnan(found["vector"][0])


def test_values_set_one_by_one_or_together_read_back(tmp_path):
    cache = JsonCache(tmp_path / "responses")
    assert cache.get(digest(1)) is None
    long_text = "x" * 40_000                 # past diskcache's min_file_size: kept in a file of its own
    cache.set(digest(1), {"content": "one"})
    cache.set_many([(digest(2), {"content": long_text}), (digest(3), {"content": "first"}),
                    (digest(3), {"content": "second"})])
    cache.set_many([(digest(1), {"content": "one again"})])
    cache.close()
    reopened = JsonCache(tmp_path / "responses")
    assert [reopened.get(digest(n)) for n in (1, 2, 3, 4)] == [
        {"content": "one again"}, {"content": long_text}, {"content": "second"}, None]
    reopened.close()


def test_what_another_process_stores_meanwhile_is_seen(tmp_path):
    """Ray's workers and the cache actor share the driver's cache folder."""
    cache, other = JsonCache(tmp_path / "responses"), JsonCache(tmp_path / "responses")
    assert cache.get(digest(5)) is None
    other.set(digest(5), {"content": "from a worker"})
    assert cache.get(digest(5)) == {"content": "from a worker"}
    cache.close()
    other.close()


def test_an_entry_runner_did_not_write_is_asked_again(tmp_path):
    import diskcache
    disk = diskcache.Cache(str(tmp_path / "responses"))
    disk.set(digest(1), "{not json")
    disk.set(digest(2), b"bytes")
    disk.close()
    cache = JsonCache(tmp_path / "responses")
    assert cache.get(digest(1)) is None and cache.get(digest(2)) is None
    cache.close()


def test_a_folder_that_is_not_a_cache_is_one_clear_error(tmp_path):
    (tmp_path / "responses").write_text("a file, not a folder")
    with pytest.raises(CacheUnusable, match="cannot be used"):
        JsonCache(tmp_path / "responses")


def test_open_caches_opens_what_the_pipeline_uses(tmp_path):
    pipeline = load_pipeline(REPO / "pipelines" / "citation_judge.yaml")
    opened = open_caches(pipeline, tmp_path)
    assert sorted(opened) == ["responses"]
    for cache in opened.values():
        cache.close()
