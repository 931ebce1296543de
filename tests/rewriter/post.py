"""A plan's post-processing query run over rows that stand for its released relation."""

from __future__ import annotations

import duckdb

from rewriter import Plan
from tests.rewriter.noise import ZeroNoise


def post_processed(made: Plan, rows: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
    """``made.post_sql`` over ``rows`` (one value per released column: keys, then
    aggregates), in a DuckDB of its own, as the proxy runs it."""
    return post_named(made, rows)[1]


def post_named(
    made: Plan, rows: list[tuple[object, ...]]
) -> tuple[list[str], list[tuple[object, ...]]]:
    """``post_processed``, with the names of the answer's columns."""
    columns = made.release([], ZeroNoise()).columns
    conn = duckdb.connect()
    conn.execute(f"CREATE TABLE released ({', '.join(f'{n} {t}' for n, t in columns)})")
    if rows:
        places = ", ".join("?" for _ in columns)
        conn.executemany(f"INSERT INTO released VALUES ({places})", [list(r) for r in rows])
    result = conn.execute(made.post_sql)
    names = [d[0] for d in result.description or []]
    return names, [tuple(r) for r in result.fetchall()]
