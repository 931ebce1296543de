"""rewriter.dialects: sqlglot's dialects made once write the SQL that their names write."""

from __future__ import annotations

import pytest
from sqlglot import exp, parse_one

from rewriter.dialects import DEFAULT, dialect

_QUERIES = (
    "SELECT CAST(x AS DECIMAL) AS d, 'it''s' || y FROM t WHERE z LIKE 'a\\%' ESCAPE '\\'",
    "SELECT date_trunc('month', ts) AT TIME ZONE 'UTC', COUNT(*) FILTER (WHERE a > 1) FROM t",
    "SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY v), x::TIMESTAMPTZ FROM t GROUP BY 2",
)


@pytest.mark.parametrize("sql", _QUERIES)
@pytest.mark.parametrize("name", ["duckdb", "postgres"])
def test_a_dialect_made_once_writes_as_its_name(sql: str, name: str) -> None:
    tree = parse_one(sql, read="postgres")
    assert tree.sql(dialect=dialect(name)) == tree.sql(dialect=name)
    assert tree.sql(dialect=dialect(name)) == tree.sql(dialect=name)  # and again


@pytest.mark.parametrize("sql", _QUERIES)
def test_the_default_dialect_writes_as_sql_without_one(sql: str) -> None:
    tree = parse_one(sql, read="postgres")
    assert tree.sql(dialect=DEFAULT) == tree.sql()


def test_each_dialect_is_made_once() -> None:
    assert dialect("duckdb") is dialect("duckdb")
    assert dialect("postgres") is dialect("postgres")
    assert dialect("duckdb") is not dialect("postgres")


def test_another_dialect_is_read_from_its_name() -> None:
    assert exp.column("a", quoted=True).sql(dialect=dialect("mysql")) == "`a`"
