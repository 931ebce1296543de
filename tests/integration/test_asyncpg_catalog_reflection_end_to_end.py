"""asyncpg through a real `dpproxy serve`, on DuckDB and PostgreSQL, with the catalog
statements SQLAlchemy's asyncpg and pg8000 reflection sends, compared with a real
PostgreSQL 15: the types each statement is described with and the values asyncpg reads.

asyncpg prepares (Parse, Describe) every statement, encodes each parameter by its
described type and asks for every result column in binary. Before: json, jsonb, bytea and
int2[] (pg_index.indkey) columns were refused in binary; jsonb was described as json;
``$1::oid`` and ``oid = $1`` were text (an int refused: "expected str, got int");
``current_setting($1::text)`` failed at Describe (42704 for the stand-in 'a'); pg_settings
named TimeZone 'timezone'."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.server import RunningServer

asyncpg = pytest.importorskip("asyncpg")

pytestmark = pytest.mark.integration

PATIENTS = 200
DIRECTORY_PREFIX = "asyncpg-reflection-"

#: Statements, their arguments; each is prepared, described and fetched.
STATEMENTS: list[tuple[str, tuple[object, ...]]] = [
    ("""SELECT '{}'::json j, '{"a": 1}'::jsonb b, 'abc'::bytea y""", ()),
    ("SELECT ARRAY[1, 2]::int2[] a, ARRAY['x', NULL]::text[] t, ARRAY[1.5]::float8[] f", ()),
    ("SELECT ARRAY[true]::bool[] b, ARRAY[7]::int4[] i, ARRAY['pg_class']::name[] n", ()),
    ("SELECT i.indkey FROM pg_catalog.pg_index i WHERE i.indrelid = $1", (0,)),
    ("SELECT $1::oid o", (5,)),
    ("SELECT relname FROM pg_catalog.pg_class WHERE oid = $1", (0,)),  # OIDs differ
    ("SELECT count(*) FROM pg_class WHERE oid = $1::regclass", ("pg_class",)),
    ("SELECT current_setting($1::text) s", ("default_table_access_method",)),
    ("SELECT current_setting($1::VARCHAR) s", ("standard_conforming_strings",)),
    ("SELECT name FROM pg_settings WHERE name = $1", ("TimeZone",)),
    ("SELECT name FROM pg_settings WHERE name IN ('DateStyle', 'IntervalStyle') ORDER BY 1", ()),
]

Described = tuple[list[int], list[tuple[str, int]], list[tuple[object, ...]]]


async def _answers(dsn: str) -> list[Described | str]:
    conn = await asyncpg.connect(dsn)
    found: list[Described | str] = []
    try:
        for sql, arguments in STATEMENTS:
            try:
                statement = await conn.prepare(sql)
                rows = await statement.fetch(*arguments)
            except asyncpg.PostgresError as error:
                found.append(f"{error.sqlstate} {error}")
                continue
            found.append(
                (
                    [p.oid for p in statement.get_parameters()],
                    [(a.name, a.type.oid) for a in statement.get_attributes()],
                    [tuple(row) for row in rows],
                )
            )
    finally:
        await conn.close()
    return found


def test_asyncpg_reflection_statements_answer_as_postgresql(
    server: RunningServer, pg_dsn: str
) -> None:
    theirs = dict(zip(STATEMENTS, asyncio.run(_answers(pg_dsn)), strict=True))
    ours = dict(zip(STATEMENTS, asyncio.run(_answers(server.dsn("alice"))), strict=True))
    assert {k: _as_postgresql(v) for k, v in ours.items()} == theirs


#: Result column types dpproxy's catalog shows otherwise: an oid as a bigint, a name as
#: text (and name[] as text[]), an int2vector as int2[] (asyncpg reads the same values).
_SHOWN_OTHERWISE = {("o", 20): 26, ("relname", 25): 19, ("n", 1009): 1003, ("indkey", 1005): 22}


def _as_postgresql(answer: Described | str) -> Described | str:
    if isinstance(answer, str):
        return answer
    parameters, columns, rows = answer
    shown = [(name, _SHOWN_OTHERWISE.get((name, oid), oid)) for name, oid in columns]
    return parameters, shown, rows
