"""Answers written as rows of a diskcache.Cache's table, many in one statement, when their
keys are known not to be there yet.

`Cache.set` looks for the key's row (to replace it and remove its file), then inserts, with
the Python around both: about 23 us an answer in a cold run, 120 ms of 3.4 s at 256 calls in
flight (bench/RESULTS.md, issue 26). A key that a cache's only writer never stored, in a
cache that was empty when opened (json_cache.py, key_filter.py), has no row: its row is the
one `Cache.set` would insert for a text that diskcache keeps in the table (shorter than the
disk's min_file_size), written by `executemany` in the caller's transaction. diskcache's
triggers keep its count and size as for any insert. Only a table laid out exactly as
diskcache 5 lays it out, with diskcache's own Disk, is written this way (`writable`); the
tests read such rows back through diskcache's get, len, volume and check."""

from __future__ import annotations

import sqlite3
import time

import diskcache

COLUMNS = ("rowid", "key", "raw", "store_time", "expire_time", "access_time", "access_count", "tag", "size", "mode",
           "filename", "value")
UNIQUE_INDEX = "Cache_key_raw"          # (key, raw): a row written meanwhile by another process is kept, not doubled
_INSERT = ("INSERT OR IGNORE INTO Cache(key, raw, store_time, expire_time, access_time, access_count, tag, size,"
           " mode, filename, value) VALUES (?, 1, ?, NULL, ?, 0, NULL, 0, ?, NULL, ?)")


def writable(cache: diskcache.Cache) -> bool:
    """Whether rows may be written straight into this cache's table."""
    if type(cache.disk) is not diskcache.Disk:
        return False
    try:
        columns = tuple(row[1] for row in cache._con.execute("PRAGMA table_info(Cache)"))
        unique = {row[1] for row in cache._con.execute("PRAGMA index_list(Cache)") if row[2]}
    except sqlite3.Error:
        return False
    return columns == COLUMNS and UNIQUE_INDEX in unique


def insert_new(cache: diskcache.Cache, texts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Insert the (key, text) pairs kept in the table (in the caller's transaction), and
    return those diskcache keeps in files, for `Cache.set`."""
    limit = cache.disk.min_file_size
    now = time.time()
    cache._con.executemany(_INSERT, [(key, now, now, diskcache.core.MODE_RAW, text)
                                     for key, text in texts if len(text) < limit])
    return [(key, text) for key, text in texts if len(text) >= limit]
