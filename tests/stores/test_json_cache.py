"""The JSON cache: a local run that found its cache empty looks up only what it stored
(runner/stores/key_filter.py), anything else looks every key up."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from runner.pipeline.loader import load_pipeline
from runner.stores.json_cache import JsonCache, open_caches
from runner.stores.key_filter import KeyFilter

REPO = Path(__file__).resolve().parents[2]


def digest(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


def test_the_filter_finds_every_key_it_was_given_and_few_others():
    given, others = [digest(n) for n in range(20_000)], [digest(n) for n in range(20_000, 40_000)]
    kept = KeyFilter()
    for key in given:
        kept.add(key)
    assert all(key in kept for key in given)
    assert sum(key in kept for key in others) < 20          # about one in a million at this size


@pytest.mark.parametrize("key", ["search|openai|llm as judge", "", "short", "-" * 40, "zz" * 32, "\ud83d lone"])
def test_keys_that_are_not_hex_digests_are_hashed_first(key):
    kept = KeyFilter()
    assert key not in kept
    kept.add(key)
    assert key in kept


class CountingDisk:
    """A diskcache.Cache stand-in that counts the lookups reaching it."""

    def __init__(self, cache) -> None:
        self.cache, self.lookups = cache, 0

    def get(self, key):
        self.lookups += 1
        return self.cache.get(key)

    def __getattr__(self, name):
        return getattr(self.cache, name)


def test_an_only_writer_of_an_empty_cache_looks_up_only_what_it_stored(tmp_path):
    cache = JsonCache(tmp_path / "responses", only_writer=True)
    disk = cache._cache = CountingDisk(cache._cache)
    assert cache.get(digest(1)) is None and disk.lookups == 0           # nothing there, nothing asked
    cache.set(digest(1), {"content": "one"})
    cache.set_many([(digest(2), {"content": "two"}), (digest(3), {"content": "three"})])
    assert [cache.get(digest(n)) for n in (1, 2, 3)] == [{"content": "one"}, {"content": "two"}, {"content": "three"}]
    assert disk.lookups == 3
    assert cache.get(digest(4)) is None and disk.lookups == 3
    cache.close()


def test_what_another_writer_stores_meanwhile_is_not_seen_by_an_only_writer(tmp_path):
    """The promise `only_writer` makes (a local run's caches): broken, an answer is asked again."""
    mine, other = JsonCache(tmp_path / "responses", only_writer=True), JsonCache(tmp_path / "responses")
    other.set(digest(7), {"content": "theirs"})
    assert mine.get(digest(7)) is None
    assert JsonCache(tmp_path / "responses", only_writer=True).get(digest(7)) == {"content": "theirs"}
    mine.close()
    other.close()


@pytest.mark.parametrize("only_writer", [True, False])
def test_a_cache_with_entries_when_opened_looks_every_key_up(tmp_path, only_writer):
    first = JsonCache(tmp_path / "responses")
    first.set(digest(1), {"content": "old"})
    cache = JsonCache(tmp_path / "responses", only_writer=only_writer)
    disk = cache._cache = CountingDisk(cache._cache)
    first.set(digest(2), {"content": "written by another process meanwhile"})
    assert cache.get(digest(1)) == {"content": "old"}
    assert cache.get(digest(2)) == {"content": "written by another process meanwhile"}
    assert cache.get(digest(3)) is None and disk.lookups == 3
    first.close()
    cache.close()


def test_a_cache_not_said_to_be_written_alone_looks_every_key_up(tmp_path):
    """Ray's workers and the cache actor share the driver's cache folder: none filters."""
    cache, other = JsonCache(tmp_path / "responses"), JsonCache(tmp_path / "responses")
    assert cache.get(digest(5)) is None
    other.set(digest(5), {"content": "from a worker"})
    assert cache.get(digest(5)) == {"content": "from a worker"}
    cache.close()
    other.close()


def test_open_caches_passes_on_who_writes(tmp_path):
    pipeline = load_pipeline(REPO / "pipelines" / "citation_judge.yaml")
    for only_writer in (True, False):
        opened = open_caches(pipeline, tmp_path / f"cache-{only_writer}", only_writer=only_writer)
        assert (opened["responses"]._stored is not None) is only_writer
        for cache in opened.values():
            cache.close()


def test_rows_written_straight_read_back_through_diskcache_as_if_it_wrote_them(tmp_path):
    import diskcache
    cache = JsonCache(tmp_path / "responses", only_writer=True)
    long_text = "x" * 40_000                 # past diskcache's min_file_size: kept in a file, by Cache.set
    cache.set_many([(digest(1), {"content": "one"}), (digest(2), {"content": long_text}),
                    (digest(3), {"content": "first"}), (digest(3), {"content": "second"})])
    cache.set_many([(digest(1), {"content": "one again"}), (digest(4), {"content": "four"})])
    cache.close()
    disk = diskcache.Cache(str(tmp_path / "responses"))
    assert len(disk) == 4 and disk.check() == []
    assert [json.loads(disk.get(digest(n)))["content"] for n in (1, 2, 3, 4)] == ["one again", long_text, "second",
                                                                                  "four"]
    assert disk.volume() > 40_000
    assert JsonCache(tmp_path / "responses").get(digest(4)) == {"content": "four"}
    disk.close()


def test_a_row_another_process_wrote_meanwhile_is_kept(tmp_path):
    """An only writer that is not: the other answer stays, nothing fails, nothing is counted twice."""
    mine, other = JsonCache(tmp_path / "responses", only_writer=True), JsonCache(tmp_path / "responses")
    other.set(digest(9), {"content": "theirs"})
    mine.set_many([(digest(9), {"content": "mine"}), (digest(10), {"content": "ten"})])
    assert other.get(digest(9)) == {"content": "theirs"} and other.get(digest(10)) == {"content": "ten"}
    assert len(other._cache) == 2
    mine.close()
    other.close()


def test_rows_go_through_diskcache_when_its_table_is_not_the_one_known(tmp_path, monkeypatch):
    import runner.stores.disk_rows as disk_rows
    monkeypatch.setattr(disk_rows, "COLUMNS", (*disk_rows.COLUMNS, "added_by_a_newer_diskcache"))
    cache = JsonCache(tmp_path / "responses", only_writer=True)
    assert not cache._rows_writable
    monkeypatch.setattr(disk_rows, "insert_new", lambda *_: pytest.fail("wrote rows into an unknown table"))
    cache.set_many([(digest(1), {"content": "one"})])
    assert cache.get(digest(1)) == {"content": "one"} and cache.get(digest(2)) is None
    cache.close()


def test_the_table_written_is_diskcache_5s():
    import diskcache

    from runner.stores.disk_rows import writable
    cache = diskcache.Cache()
    assert writable(cache)
    cache.close()
