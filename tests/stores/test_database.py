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
