"""An undeclared array parameter, ``x = ANY($1)``, ``x <> ALL($1)``, ``x LIKE ANY($1)``,
``$1 = ANY($2)``, ``x = ANY($1::int[])``: typed as PostgreSQL 15 types it (the array type
of ``x``'s type: text[], int4[], float8[], date[], timestamp[]…), which asyncpg reads to
send a Python list (it refused a list for the text dpproxy said); described with an empty
array of that type; bound from the binary array asyncpg sends. The types are compared
with a real PostgreSQL's ParameterDescription, and each query's bounded exact answer on
DuckDB and PostgreSQL (one row per person: every count exact) with PostgreSQL's own answer
to the statement with the same binary value."""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Iterator, Sequence
from typing import Literal, cast

import duckdb
import psycopg
import pytest

from proxy import parameters
from proxy.backends import DeclaredType, column_digits, column_types
from proxy.parameter_type_rules import catalog_column_oids
from proxy.protocol import values as v
from proxy.seam import QueryError
from rewriter import Catalog, PlanRequest, TablePolicy, build_catalog, plan
from tests.postgres_schema import scratch_schema
from tests.proxy.test_parameter_types import COLUMNS, TABLES, V
from tests.rewriter.scratch import insert

TEXTS, INTS4, INTS2, INTS8, FLOATS8 = 1009, 1007, 1005, 1016, 1022
NUMERICS, DATES, TIMESTAMPS, BOOLS, VARCHARS = 1231, 1182, 1115, 1000, 1015
T, I4 = v.TEXT, v.INT4

#: Statements and the types PostgreSQL 15 describes their parameters with (measured;
#: test_the_cases_are_postgresql_s checks them against the server).
CASES: list[tuple[str, tuple[int, ...]]] = [
    (V + "department = ANY($1)", (TEXTS,)),  # varchar: compared as text
    (V + "note = ANY($1)", (TEXTS,)),
    (V + "department <> ALL($1)", (TEXTS,)),
    (V + "department = SOME($1)", (TEXTS,)),
    (V + "department = ANY(($1))", (TEXTS,)),
    (V + "NOT (department = ANY($1))", (TEXTS,)),
    (V + "lower(diagnosis) = ANY($1)", (TEXTS,)),
    (V + "diagnosis LIKE ANY($1)", (TEXTS,)),
    (V + "diagnosis NOT ILIKE ALL($1)", (TEXTS,)),
    (V + "length_of_stay = ANY($1)", (INTS4,)),
    (V + "length_of_stay >= ALL($1)", (INTS4,)),
    (V + "small = ANY($1)", (INTS2,)),
    (V + "patient_id = ANY($1)", (INTS8,)),
    (V + "cost < ANY($1)", (FLOATS8,)),
    (V + "amount = ANY($1)", (NUMERICS,)),
    (V + "length_of_stay * 2.5 = ANY($1)", (NUMERICS,)),
    (V + "visit_date = ANY($1)", (DATES,)),
    (V + "visit_date > ALL($1)", (DATES,)),
    (V + "ts = ANY($1)", (TIMESTAMPS,)),
    (V + "visit_date + INTERVAL '1 hour' < ANY($1)", (TIMESTAMPS,)),
    (V + "flag = ANY($1)", (BOOLS,)),
    (V + "$1 = ANY($2)", (T, TEXTS)),
    (V + "$1 LIKE ANY($2)", (T, TEXTS)),
    (V + "'a' = ANY($1) AND NULL = ANY($2)", (TEXTS, TEXTS)),
    (V + "1 = ANY($1)", (INTS4,)),
    (V + "length_of_stay + $1 = ANY($2)", (I4, INTS4)),
    (V + "$1 = ANY($2::int[])", (I4, INTS4)),
    (V + "length_of_stay = ANY($1::int[])", (INTS4,)),
    (V + "length_of_stay = ANY(CAST($1 AS bigint[]))", (INTS8,)),
    (V + "department = ANY($1::varchar[])", (VARCHARS,)),
    (V + "length_of_stay = ANY($1) AND patient_id = ANY($1)", (INTS4,)),
    (V + "patient_id = ANY($1) AND length_of_stay = ANY($1)", (INTS8,)),
    (V + "visit_date = ANY($1) AND length_of_stay = ANY($2) AND cost = ANY($3)",
     (DATES, INTS4, FLOATS8)),
    (V + "length_of_stay = ANY(ARRAY[$1, 2])", (I4,)),  # an element: as before
    (V + "department = ANY(ARRAY[$1, $2])", (T, T)),
]  # fmt: skip
#: Where dpproxy says text and PostgreSQL an array type dpproxy does not take values of.
DIFFERENT: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = [
    (V + "tstz = ANY($1)", (T,), (1185,)),  # timestamptz[]
]


def types_of(sql: str, declared: Sequence[int] = ()) -> tuple[int, ...]:
    return parameters.prepare(sql, list(declared), COLUMNS).parameter_types


@pytest.mark.parametrize(("sql", "expected"), CASES, ids=range(len(CASES)))
def test_array_parameters_take_postgresql_s_types(sql: str, expected: tuple[int, ...]) -> None:
    assert types_of(sql) == expected


@pytest.mark.parametrize(("sql", "ours", "theirs"), DIFFERENT, ids=range(len(DIFFERENT)))
def test_where_dpproxy_says_text(sql: str, ours: tuple[int, ...], theirs: tuple[int, ...]) -> None:
    assert types_of(sql) == ours


def test_declared_types_win() -> None:
    assert types_of(V + "length_of_stay = ANY($1)", [INTS8]) == (INTS8,)
    assert types_of(V + "$1 = ANY($2)", [0, INTS4]) == (I4, INTS4)
    assert types_of(V + "department = ANY($1)", [v.TEXT]) == (T,)


def _declared(columns: object) -> str:
    """A CREATE TABLE's column list of test_parameter_types' TABLES entry."""
    listed = cast("dict[str, tuple[str, int | None, int | None]]", columns)
    return ", ".join(
        f"{name} {kind}" + (f"({p},{s})" if p is not None else "")
        for name, (kind, p, s) in listed.items()
    )


def test_the_cases_are_postgresql_s(pg_schema: str, pg_dsn: str) -> None:
    """Every case's types are what PostgreSQL 15 describes (ParameterDescription)."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path = "{pg_schema}"')
        for table, columns in TABLES.items():
            conn.execute(f"CREATE TABLE {table} ({_declared(columns)})")
        described: dict[str, tuple[int, ...]] = {}
        for sql in [s for s, _ in CASES] + [s for s, _, _ in DIFFERENT]:
            result = conn.pgconn.prepare(b"", sql.encode())
            assert result.status == psycopg.pq.ExecStatus.COMMAND_OK, (sql, result.error_message)
            found = conn.pgconn.describe_prepared(b"")
            described[sql] = tuple(found.param_type(i) for i in range(found.nparams))
    assert {sql: described[sql] for sql, _ in CASES} == dict(CASES)
    assert {sql: described[sql] for sql, _, _ in DIFFERENT} == {s: t for s, _, t in DIFFERENT}


# --- the stand-in at Describe, the value at Execute -----------------------------------


@pytest.mark.parametrize(
    ("sql", "described"),
    [
        (V + "department = ANY($1)", V + "department = ANY(CAST('{}' AS TEXT[]))"),
        (V + "length_of_stay <> ALL($1)", V + "length_of_stay <> ALL(CAST('{}' AS INT[]))"),
        (V + "visit_date = ANY($1::date[])", V + "visit_date = ANY(CAST('{}' AS DATE[]))"),
        (V + "ts = ANY($1)", V + "ts = ANY(CAST('{}' AS TIMESTAMP[]))"),
        (V + "tstz = ANY($1)", V + "tstz = ANY(NULL)"),  # as before: a text parameter
    ],
)
def test_describe_stands_in_an_empty_array_of_the_type(sql: str, described: str) -> None:
    assert parameters.describe_sql(parameters.prepare(sql, [], COLUMNS)) == described


def _array(element: int, items: Sequence[bytes | None], dimensions: int = 1) -> bytes:
    """A list as asyncpg sends it in binary (asyncpg/protocol/codecs/array.pyx: no NULL
    flag, lower bound 1)."""
    head = struct.pack("!iii", dimensions, 0, element) + struct.pack("!ii", len(items), 1)
    return head + b"".join(
        struct.pack("!i", -1) if item is None else struct.pack("!i", len(item)) + item
        for item in items
    )


def _ints(numbers: Sequence[int | None]) -> bytes:
    return _array(v.INT4, [None if n is None else struct.pack("!i", n) for n in numbers])


def _texts(texts: Sequence[str | None]) -> bytes:
    return _array(v.TEXT, [None if t is None else t.encode() for t in texts])


def _floats(numbers: Sequence[float]) -> bytes:
    return _array(v.FLOAT8, [struct.pack("!d", x) for x in numbers])


def _dates(days: Sequence[dt.date | None]) -> bytes:
    epoch = dt.date(2000, 1, 1)
    return _array(
        v.DATE, [None if d is None else struct.pack("!i", (d - epoch).days) for d in days]
    )


def _timestamps(moments: Sequence[dt.datetime]) -> bytes:
    epoch = dt.datetime(2000, 1, 1)
    return _array(
        v.TIMESTAMP,
        [struct.pack("!q", (m - epoch) // dt.timedelta(microseconds=1)) for m in moments],
    )


def bound(sql: str, data: bytes, fmt: int = 1) -> str:
    return parameters.bind(parameters.prepare(sql, [], COLUMNS), [fmt], [data])


def test_asyncpg_s_binary_arrays_are_bound_by_the_inferred_type() -> None:
    assert bound(V + "department = ANY($1)", _texts(['say "hi"', None, "a\\b"])) == (
        V + r"""department = ANY(CAST('{"say \"hi\"",NULL,"a\\b"}' AS TEXT[]))"""
    )
    assert bound(V + "length_of_stay <> ALL($1)", _ints([1, None, -2])) == (
        V + "length_of_stay <> ALL(CAST('{1,NULL,-2}' AS INT[]))"
    )
    assert bound(V + "cost >= ANY($1)", _floats([0.1, 2.5])) == (
        V + "cost >= ANY(CAST('{0.1,2.5}' AS DOUBLE PRECISION[]))"
    )
    assert bound(V + "visit_date = ANY($1)", _dates([dt.date(2024, 2, 29), None])) == (
        V + "visit_date = ANY(CAST('{2024-02-29,NULL}' AS DATE[]))"
    )
    moment = dt.datetime(2024, 1, 2, 3, 4, 5, 6)
    assert bound(V + "ts = ANY($1)", _timestamps([moment])) == (
        V + """ts = ANY(CAST('{"2024-01-02 03:04:05.000006"}' AS TIMESTAMP[]))"""
    )
    assert bound(V + "department = ANY($1)", _texts([])) == (
        V + "department = ANY(CAST('{}' AS TEXT[]))"
    )
    # Sent in text (node-postgres, a string for the list): read as the array type.
    assert bound(V + "length_of_stay = ANY($1)", b"{1,2}", 0) == (
        V + "length_of_stay = ANY(CAST('{1,2}' AS INT[]))"
    )


def test_a_cast_to_the_array_type_is_written_once() -> None:
    assert bound(V + "length_of_stay = ANY($1::int[])", _ints([3, 4])) == (
        V + "length_of_stay = ANY(CAST('{3,4}' AS INT[]))"
    )
    with_text = parameters.prepare(V + "department = ANY($1::text[])", [], COLUMNS)
    assert parameters.bind(with_text, [0], [b"{A,B}"]) == (
        V + "department = ANY(CAST('{A,B}' AS TEXT[]))"
    )
    # Another array type than the cast's: both casts stay (refused by the rewriter).
    declared = parameters.prepare(V + "length_of_stay = ANY($1::bigint[])", [INTS4], COLUMNS)
    assert parameters.bind(declared, [1], [_ints([3])]) == (
        V + "length_of_stay = ANY(CAST(CAST('{3}' AS INT[]) AS BIGINT[]))"
    )


@pytest.mark.parametrize(
    ("data", "sqlstate"),
    [
        (_ints(list(range(1001))), "54000"),  # more elements than dpproxy compares with
        (_array(v.INT8, [struct.pack("!q", 1)]), "22P03"),  # int8 elements for int4[]
        (_array(v.INT4, [], dimensions=2), "0A000"),
        (_ints([1])[:-1], "22P03"),  # cut short
    ],
)
def test_binary_arrays_refused(data: bytes, sqlstate: str) -> None:
    with pytest.raises(QueryError) as refused:
        bound(V + "length_of_stay = ANY($1)", data)
    assert refused.value.sqlstate == sqlstate


def test_one_thousand_elements_are_taken() -> None:
    assert "999}" in bound(V + "length_of_stay = ANY($1)", _ints(list(range(1000))))


# --- answers: dpproxy's bounded exact count on both engines, PostgreSQL's own ----------

ITEMS = {
    "pid": DeclaredType("bigint"),
    "t": DeclaredType("character varying"),
    "i": DeclaredType("integer"),
    "f": DeclaredType("double precision"),
    "d": DeclaredType("date"),
    "ts": DeclaredType("timestamp without time zone"),
}
CREATE = (
    "CREATE TABLE {schema}.items (pid BIGINT, t VARCHAR, i INTEGER, f DOUBLE PRECISION, "
    "d DATE, ts TIMESTAMP)"
)
_TEXTS = ["a,b", 'say "hi"', "a\\b", "", "NULL", "Zoë", "x y", None]
_DAY = dt.date(2024, 2, 27)
_MOMENT = dt.datetime(2024, 3, 10, 1, 59, 59, 999999)


def _rows() -> list[tuple[object, ...]]:
    made: list[tuple[object, ...]] = []
    for n in range(48):
        made.append(
            (
                n,
                _TEXTS[n % len(_TEXTS)],
                None if n % 11 == 5 else n % 7 - 3,
                None if n % 13 == 6 else [0.1, 2.5, -1.0, 1e300, 0.30000000000000004][n % 5],
                None if n % 9 == 4 else _DAY + dt.timedelta(days=n % 6),
                _MOMENT + dt.timedelta(microseconds=n % 4) if n % 10 else None,
            )
        )
    return made


#: Conditions with $1 and the binary array asyncpg sends for it.
ANSWERS: list[tuple[str, bytes]] = [
    ("t = ANY($1)", _texts(['say "hi"', "a,b", None, "a\\b"])),
    ("t <> ALL($1)", _texts(["", "NULL"])),
    ("t = ANY($1)", _texts(["NULL"])),  # a quoted "NULL": the text, not NULL
    ("t LIKE ANY($1)", _texts(["a%", "%ë"])),
    ("t NOT LIKE ALL($1)", _texts(["a%", "%y"])),
    ("t = ANY($1)", _texts([])),
    ("i = ANY($1)", _ints([-3, 0, None])),
    ("i <> ALL($1)", _ints([1, 2])),
    ("i <> ALL($1)", _ints([])),  # true for every row, NULL i included
    ("i >= ALL($1)", _ints([-1, 1])),
    ("i = ANY($1::int[])", _ints([2, 3])),
    ("f = ANY($1)", _floats([0.1, 1e300])),
    ("f = ANY($1)", _floats([0.30000000000000004])),
    ("f < ANY($1)", _floats([-0.5, 0.2])),
    ("d = ANY($1)", _dates([_DAY, _DAY + dt.timedelta(days=3), None])),
    ("d > ALL($1)", _dates([_DAY + dt.timedelta(days=1), _DAY])),
    ("ts = ANY($1)", _timestamps([_MOMENT, _MOMENT + dt.timedelta(microseconds=2)])),
    ("ts < ANY($1)", _timestamps([_MOMENT + dt.timedelta(microseconds=1)])),
]
COUNT = "SELECT COUNT(*) FROM items WHERE "


def _catalog(schema: str) -> Catalog:
    declared = {"items": ITEMS}
    return build_catalog(
        column_types(declared),
        {"items": TablePolicy(privacy_unit="pid", max_rows_per_unit=1, max_groups_per_unit=1)},
        schema=schema,
        digits=column_digits(declared),
    )


@pytest.fixture(scope="module")
def engines(
    pg_dsn: str,
) -> Iterator[tuple[duckdb.DuckDBPyConnection, psycopg.Connection[tuple[object, ...]], str]]:
    duck = duckdb.connect()
    duck.execute(CREATE.format(schema="main"))
    insert(duck, "main.items", _rows())
    with scratch_schema(pg_dsn) as (conn, schema):
        conn.execute(CREATE.format(schema=f'"{schema}"'))
        with conn.cursor() as cur:
            cur.executemany(
                f'INSERT INTO "{schema}".items VALUES (%s, %s, %s, %s, %s, %s)', _rows()
            )
        yield duck, conn, schema


@pytest.mark.parametrize(("condition", "data"), ANSWERS, ids=range(len(ANSWERS)))
def test_answers_are_postgresql_s(
    condition: str,
    data: bytes,
    engines: tuple[duckdb.DuckDBPyConnection, psycopg.Connection[tuple[object, ...]], str],
) -> None:
    duck, conn, schema = engines
    sql = COUNT + condition
    answers = []
    dialects: tuple[tuple[Literal["duckdb", "postgres"], str], ...] = (
        ("duckdb", "main"),
        ("postgres", schema),
    )
    for dialect, catalog_schema in dialects:
        catalog = _catalog(catalog_schema)
        statement = parameters.prepare(sql, [], catalog_column_oids(catalog))
        made = plan(parameters.bind(statement, [1], [data]), catalog, PlanRequest(1.0, dialect))
        engine = duck if dialect == "duckdb" else conn
        (row,) = engine.execute(made.sql).fetchall()
        answers.append(int(str(row[0])))
    with psycopg.connect(conn.info.dsn, autocommit=True) as direct:
        direct.execute(f'SET search_path TO "{schema}"')
        own = direct.pgconn.exec_params(sql.encode(), [data], param_formats=[1])
        assert own.status == psycopg.pq.ExecStatus.TUPLES_OK, own.error_message
        value = own.get_value(0, 0)
    assert value is not None
    assert answers == [int(value.decode())] * 2, statement
