"""Fresh DuckDB databases, cheaply, for tests that build many of them (hypothesis examples).

On DuckDB 2.0 ``duckdb.connect()`` costs about 40 ms of CPU and ``executemany`` runs one
statement per row (about 1 ms each): most of a property test's time. ``fresh_duckdb()``
attaches a new in-memory catalog to one DuckDB instance per process and returns a
connection of its own (a cursor) that USEs it, so that ``main.visits`` in the rewritten
SQL is that catalog's table; nothing is shared with any other database it returned. The
catalog is detached once its connection is gone. ``insert`` adds rows in one statement
(per 500 rows), each value cast to its column's type as an INSERT of that row would.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Sequence

import duckdb

_ROOT: duckdb.DuckDBPyConnection | None = None
_NAMES = itertools.count()
#: Catalogs whose connection was collected: detached by the next fresh_duckdb() (never
#: from the finalizer itself, which may run in the middle of another DuckDB call).
_GONE: list[str] = []
_ROWS_PER_STATEMENT = 500


def fresh_duckdb() -> duckdb.DuckDBPyConnection:
    """An empty in-memory DuckDB database of its own (its schema ``main``)."""
    global _ROOT  # noqa: PLW0603 - one instance per process, made on first use
    if _ROOT is None:
        _ROOT = duckdb.connect(":memory:")
    while _GONE:
        _ROOT.execute(f"DETACH {_GONE.pop()}")
    name = f"scratch_{next(_NAMES)}"
    _ROOT.execute(f"ATTACH ':memory:' AS {name}")
    conn = _ROOT.cursor()
    conn.execute(f"USE {name}")
    weakref.finalize(conn, _GONE.append, name)
    return conn


def insert(conn: duckdb.DuckDBPyConnection, table: str, rows: Sequence[Sequence[object]]) -> None:
    """Insert ``rows``, in order, into ``table``: each value cast to its column's declared
    type, as ``executemany`` of an INSERT of each row would."""
    if not rows:
        return
    types = [str(t) for t in conn.table(table).types]
    if any(len(row) != len(types) for row in rows):
        raise ValueError(f"{table} has {len(types)} columns")
    for start in range(0, len(rows), _ROWS_PER_STATEMENT):
        chunk = rows[start : start + _ROWS_PER_STATEMENT]
        columns = [list(values) for values in zip(*chunk, strict=True)]
        if all(_one_plain_type(values) for values in columns):
            # One list per column, bound as a list of its values' own type, unnested.
            unnested = ", ".join(f"unnest(CAST(? AS {t}[]))" for t in types)
            conn.execute(f"INSERT INTO {table} SELECT {unnested}", columns)
        else:  # decimals (a list takes one width and scale for all), mixed types
            one = "(" + ", ".join(f"CAST(? AS {t})" for t in types) + ")"
            conn.execute(
                f"INSERT INTO {table} VALUES " + ", ".join([one] * len(chunk)),
                [value for row in chunk for value in row],
            )


def _one_plain_type(values: list[object]) -> bool:
    """Whether the values, but NULLs, are all BIGINT ints, all floats or all strings: a
    list of them binds as a list of BIGINT, DOUBLE or VARCHAR, each value as it would
    alone."""
    kinds = {type(v) for v in values if v is not None}
    if kinds == {int}:
        return all(-(2**63) <= v < 2**63 for v in values if isinstance(v, int))
    return len(kinds) <= 1 and kinds <= {float, str}
