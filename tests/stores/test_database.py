"""The one SQL translation for PostgreSQL: `?` placeholders become `%s` only where a statement
holds no literal that could contain a `?` or a `%`."""

import pytest

from runner.stores.database import postgres_sql


def test_placeholders_become_psycopg_placeholders():
    assert postgres_sql("SELECT a FROM t WHERE b = ? AND c IN (?, ?)") == "SELECT a FROM t WHERE b = %s AND c IN (%s, %s)"


@pytest.mark.parametrize("sql", ["SELECT a FROM t WHERE b = 'why?' AND c = ?", "SELECT a FROM t WHERE b LIKE 'x%' AND c = ?"])
def test_a_statement_with_a_literal_is_refused_before_it_reaches_the_server(sql):
    with pytest.raises(ValueError, match="holds a literal"):
        postgres_sql(sql)


def test_a_commit_that_fails_is_rolled_back_and_keeps_no_write_lock(tmp_path):
    import sqlite3

    from runner.stores.database import transaction
    db = sqlite3.connect(tmp_path / "s.sqlite", isolation_level=None)
    db.executescript("PRAGMA foreign_keys = ON; CREATE TABLE p (id INTEGER PRIMARY KEY);"
                     "CREATE TABLE c (p INTEGER REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED);")
    with pytest.raises(sqlite3.IntegrityError), transaction(db) as inside:
        inside.execute("INSERT INTO c VALUES (7)")          # checked at COMMIT: no parent 7
    assert not db.in_transaction
    other = sqlite3.connect(tmp_path / "s.sqlite", timeout=0.1, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")                         # the write lock is free
    other.execute("ROLLBACK")
