"""Catalog queries as asyncpg and pg8000 send them (SQLAlchemy's reflection), compared with
a real PostgreSQL 15.

Before: ``$1::oid`` and ``oid = $1`` were described as text (asyncpg refused an int:
"expected str, got int"), ``$1::regclass`` as text; ``current_setting($1::text)`` failed
at Describe (42704 for the stand-in 'a'); pg_settings named TimeZone 'timezone' (``WHERE
name = 'TimeZone'``: no row) and ``SHOW TimeZone``'s column was 'timezone'. Real
components: DuckDB, the state store, the catalog responder, the PostgreSQL server.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator

import psycopg
import pytest

from accountant import AnalystBudget, Epsilon
from proxy import parameters
from proxy.asker import Asker
from proxy.catalog.responder import CatalogResponder
from proxy.catalog.settings import settings_literal
from proxy.pipeline import Pipeline
from proxy.protocol import values as v
from proxy.session import AnalystSession
from tests.proxy.local_pipeline import local_pipeline

pytestmark = pytest.mark.postgres

OID, NAME, CHAR, TEXT, BOOL, INT4 = v.OID, v.NAME, v.CHAR, v.TEXT, v.BOOL, v.INT4
REGPROC, REGCLASS, REGTYPE, REGPROCEDURE, REGNAMESPACE, REGROLE = 24, 2205, 2206, 2202, 4089, 4096

#: Catalog statements and the types PostgreSQL 15 describes their parameters with.
CASES: list[tuple[str, tuple[int, ...]]] = [
    ("SELECT $1::oid", (OID,)),
    ("SELECT $1::pg_catalog.oid", (OID,)),
    ("SELECT $1::regclass", (REGCLASS,)),
    ("SELECT $1::pg_catalog.regclass", (REGCLASS,)),
    ("SELECT $1::regtype, $2::regproc, $3::regnamespace", (REGTYPE, REGPROC, REGNAMESPACE)),
    ("SELECT $1::regrole, $2::regprocedure", (REGROLE, REGPROCEDURE)),
    ('SELECT $1::name, $2::"char"', (NAME, CHAR)),
    ("SELECT 1 FROM pg_class WHERE oid = $1", (OID,)),
    ("SELECT 1 FROM pg_catalog.pg_class c WHERE c.relnamespace = $1", (OID,)),
    ("SELECT 1 FROM pg_class WHERE relname = $1 AND relkind = $2", (NAME, CHAR)),
    ("SELECT 1 FROM pg_class WHERE oid = $1::regclass", (REGCLASS,)),
    ("SELECT 1 FROM pg_attribute WHERE attrelid = $1 AND attnum = ANY($2)", (OID, 1005)),
    ("SELECT 1 FROM pg_attribute WHERE atttypid = $1", (OID,)),
    ("SELECT 1 FROM pg_type WHERE typname = $1 AND oid = $2", (NAME, OID)),
    (
        "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relname = $1 AND n.nspname = $2 AND pg_catalog.pg_table_is_visible(c.oid)",
        (NAME, NAME),
    ),
    ("SELECT 1 FROM information_schema.tables WHERE table_name = $1", (NAME,)),
    (
        "SELECT 1 FROM information_schema.columns "
        "WHERE ordinal_position = $1 AND is_nullable = $2 AND data_type = $3",
        (INT4, TEXT, TEXT),
    ),
    ("SELECT current_setting($1::text)", (TEXT,)),
    ("SELECT current_setting($1, $2)", (TEXT, BOOL)),
]
#: Where dpproxy still says text: its catalog keeps a regproc as its name (typinput
#: 'boolin'), and it takes no arrays of names or of "char".
DIFFERENT: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = [
    ("SELECT 1 FROM pg_type WHERE typinput = $1", (TEXT,), (OID,)),
    ("SELECT 1 FROM pg_class WHERE relname = ANY($1)", (TEXT,), (1003,)),
]


def types_of(sql: str) -> tuple[int, ...]:
    return parameters.prepare(sql, [], {}).parameter_types


@pytest.mark.parametrize(("sql", "expected"), CASES, ids=range(len(CASES)))
def test_catalog_parameters_take_postgresql_s_types(sql: str, expected: tuple[int, ...]) -> None:
    assert types_of(sql) == expected


@pytest.mark.parametrize(("sql", "ours", "theirs"), DIFFERENT, ids=range(len(DIFFERENT)))
def test_where_dpproxy_says_text(sql: str, ours: tuple[int, ...], theirs: tuple[int, ...]) -> None:
    assert types_of(sql) == ours


def test_an_analyst_table_qualified_by_its_schema_keeps_its_columns() -> None:
    columns = {"visits": {"cost": v.FLOAT8}}
    parsed = parameters.prepare("SELECT 1 FROM public.visits WHERE cost > $1", [], columns)
    assert parsed.parameter_types == (v.FLOAT8,)


def test_the_cases_are_postgresql_s(pg_dsn: str) -> None:
    described: dict[str, tuple[int, ...]] = {}
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for sql, *_ in [*CASES, *DIFFERENT]:
            result = conn.pgconn.prepare(b"", sql.encode())
            assert result.status == psycopg.pq.ExecStatus.COMMAND_OK, (sql, result.error_message)
            found = conn.pgconn.describe_prepared(b"")
            described[sql] = tuple(found.param_type(i) for i in range(found.nparams))
    assert {sql: described[sql] for sql, _ in CASES} == dict(CASES)
    assert {sql: described[sql] for sql, _, _ in DIFFERENT} == {s: t for s, _, t in DIFFERENT}


def test_object_identifier_parameters_are_read_as_postgresql_reads_them() -> None:
    # asyncpg sends an oid in binary, a regclass in text (its name); pgJDBC may send either.
    assert v.decode_parameter(OID, struct.pack("!I", 4294967295), 1) == 4294967295
    assert v.decode_parameter(REGCLASS, b"pg_class", 0) == "pg_class"
    assert v.decode_parameter(REGCLASS, struct.pack("!I", 1259), 1) == 1259
    statement = parameters.prepare("SELECT $1::regclass, $2::oid", [])
    bound = parameters.bind(statement, [0, 1], [b"pg_class", struct.pack("!I", 1259)])
    assert bound == "SELECT CAST('pg_class' AS REGCLASS), CAST(1259 AS OID)"


@pytest.mark.parametrize(
    ("sql", "described"),
    [
        ("SELECT current_setting($1::text)", "SELECT CURRENT_SETTING(CAST('timezone' AS TEXT))"),
        ("SELECT current_setting($1::VARCHAR)",
         "SELECT CURRENT_SETTING(CAST('timezone' AS VARCHAR))"),
        ("SELECT pg_catalog.current_setting($1, $2)",
         "SELECT pg_catalog.current_setting('timezone', TRUE)"),
        ("SELECT $1::regclass", "SELECT CAST('0' AS REGCLASS)"),
    ],
)  # fmt: skip
def test_describe_stands_in_values_the_catalog_takes(sql: str, described: str) -> None:
    assert parameters.describe_sql(parameters.prepare(sql, [])) == described


# --- Through a session: its catalog and its parameters ----------------------------------


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    made = local_pipeline(tmp_path_factory.mktemp("catalog_parameter_types"))
    yield made
    made.ledger.close()


@pytest.fixture(scope="module")
def responder(pipeline: Pipeline) -> Iterator[CatalogResponder]:
    made = CatalogResponder(pipeline.catalog)
    yield made
    made.close()


def session(pipeline: Pipeline, responder: CatalogResponder) -> AnalystSession:
    budget = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon(1))
    return AnalystSession(
        pipeline, Asker("alice", budget, "127.0.0.1"), "test", responders=(responder,)
    )


def answers(s: AnalystSession, sql: str) -> tuple[tuple[str, ...], list[tuple[object, ...]]]:
    result = asyncio.run(s.execute(sql))
    return tuple(c.name for c in result.columns), [tuple(row) for row in result.rows]


def in_postgresql(pg_dsn: str, sql: str) -> tuple[tuple[str, ...], list[tuple[object, ...]]]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        cursor = conn.execute(sql)
        assert cursor.description is not None
        return tuple(c.name for c in cursor.description), [tuple(r) for r in cursor.fetchall()]


NAMES = (
    "SELECT name FROM pg_settings WHERE name IN ('TimeZone', 'DateStyle', 'IntervalStyle', "
    "'timezone', 'work_mem') ORDER BY name"
)


@pytest.mark.parametrize(
    "sql",
    [
        NAMES,
        "SELECT count(*)::text AS n FROM pg_settings WHERE name = 'TimeZone'",
        "SELECT unit FROM pg_settings WHERE name = 'work_mem'",
        "SELECT current_setting('default_table_access_method')",
        "SELECT CASE WHEN current_setting('TIMEZONE') <> '' THEN 'set' END AS known",
        "SELECT CASE WHEN current_setting('timezone'::text) <> '' THEN 'set' END AS known",
    ],
)
def test_settings_are_named_as_postgresql_names_them(
    pipeline: Pipeline, responder: CatalogResponder, pg_dsn: str, sql: str
) -> None:
    assert answers(session(pipeline, responder), sql) == in_postgresql(pg_dsn, sql)


@pytest.mark.parametrize(
    "name", ["TimeZone", "timezone", "DATESTYLE", "intervalstyle", "work_mem", "search_path"]
)
def test_show_s_column_is_the_setting_s_name_as_postgresql_spells_it(
    pipeline: Pipeline, responder: CatalogResponder, pg_dsn: str, name: str
) -> None:
    s = session(pipeline, responder)
    assert answers(s, f"SHOW {name}")[0] == in_postgresql(pg_dsn, f"SHOW {name}")[0]
    described = asyncio.run(s.describe(f"SHOW {name}"))
    assert described is not None
    assert [c.name for c in described] == list(in_postgresql(pg_dsn, f"SHOW {name}")[0])


def test_show_all_spells_the_names_as_postgresql(
    pipeline: Pipeline, responder: CatalogResponder
) -> None:
    names = [row[0] for row in answers(session(pipeline, responder), "SHOW ALL")[1]]
    assert {"DateStyle", "IntervalStyle", "TimeZone"} <= set(names)
    assert "timezone" not in names
    assert names == sorted(names, key=str.lower)


def test_the_catalog_s_settings_rows_are_named_as_in_postgresql() -> None:
    literal = settings_literal({"timezone": "UTC", "myapp.x": "1", "work_mem": "4MB"}).sql()
    assert "'TimeZone'" in literal and "'work_mem'" in literal and "myapp" not in literal
