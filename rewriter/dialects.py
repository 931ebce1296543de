"""sqlglot's dialects, each made once.

``node.sql(dialect="duckdb")`` makes a new ``Dialect`` at each call (``Dialect.get_or_raise``
reads the name and its settings), a good part of the cost of a small expression's SQL; given
a ``Dialect`` itself, sqlglot uses it as it is. A dialect holds nothing that generating SQL
changes (its version, identifier normalization and settings, set when it is made), so the
SQL is the same.
"""

from __future__ import annotations

from sqlglot.dialects.dialect import Dialect

#: sqlglot's own dialect: what ``node.sql()`` writes.
DEFAULT = Dialect.get_or_raise(None)

_MADE = {name: Dialect.get_or_raise(name) for name in ("duckdb", "postgres")}


def dialect(name: str) -> Dialect:
    """The dialect ``name`` (as ``Dialect.get_or_raise`` reads it), made once for DuckDB
    and PostgreSQL."""
    return _MADE.get(name) or Dialect.get_or_raise(name)
