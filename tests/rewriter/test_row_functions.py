"""nullif, left and concat in row-level expressions (rewriter.passes.row_functions).

Each form is planned for DuckDB and for PostgreSQL, its bounded SQL run on both, and the
answer released without noise; it must equal what PostgreSQL itself computes for the
analyst's SQL on the same rows (one row per person, values within their bounds: the
bounding changes nothing here). The rows hold what the rewrites must get right: NULL,
empty text, multibyte and combining characters (left counts characters), an integer
compared with 2.5 (nullif compares as numbers), text with spaces. Forms the engines would
compute differently are refused, with messages that show the analyst's SQL.
"""

from __future__ import annotations

import datetime as dt
import math
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import duckdb
import psycopg
import pytest
import sqlglot

from rewriter import (
    ColumnPolicy,
    ColumnType,
    Plan,
    PlanRequest,
    Rejected,
    TablePolicy,
    build_catalog,
    plan,
)
from rewriter.intervals import Interval
from tests.rewriter.coupling import in_key_order
from tests.rewriter.driver_sql import CREATE, INSERT, catalog
from tests.rewriter.noise import ZeroNoise


@dataclass(frozen=True)
class Note:
    name: str | None
    code: str | None
    stay: int | None
    cost: float | None
    flag: bool | None
    day: dt.date | None


BASE = [
    Note("Anna", "A", 3, 2.5, True, dt.date(2024, 1, 2)),
    Note("Jörg", "B", 0, 0.0, False, None),
    Note("éclair", None, 2, -3.0, None, dt.date(1999, 12, 31)),  # é: one code point
    Note("e\u0301te", "Ü", -4, 10.0, True, None),  # é: e and a combining accent
    Note("👍🏽 ok", "A", None, None, False, dt.date(2020, 2, 29)),  # two code points
    Note("", "B", 2, 2.5, None, None),
    Note(None, None, 30, 100.0, None, None),
    Note("  Anna ", "Ü", 0, -0.5, True, dt.date(2024, 1, 2)),
]
COPIES = 3  # each base row belongs to this many persons, one row each
ROWS = [
    (1 + i * COPIES + j, n.name, n.code, n.stay, n.cost, n.flag, n.day)
    for i, n in enumerate(BASE)
    for j in range(COPIES)
]


@pytest.fixture(scope="module")
def duck() -> Iterator[duckdb.DuckDBPyConnection]:
    conn = duckdb.connect(":memory:")
    conn.execute(CREATE.format(schema="main"))
    conn.executemany(INSERT.format(schema="main", marks=", ".join("?" * 7)), ROWS)
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[tuple[psycopg.Connection[tuple[object, ...]], str]]:
    schema = f"dpproxy_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        try:
            conn.execute(CREATE.format(schema=f'"{schema}"'))
            with conn.cursor() as cur:
                marks = ", ".join(["%s"] * 7)
                cur.executemany(INSERT.format(schema=f'"{schema}"', marks=marks), ROWS)
            conn.execute(f'SET search_path = "{schema}"')
            yield conn, schema
        finally:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


Postgres = tuple[psycopg.Connection[tuple[object, ...]], str]
REQUEST = PlanRequest(10.0, delta=0.4)  # a low threshold: groups of COPIES persons pass


def released(sql: str, duck: duckdb.DuckDBPyConnection, postgres: Postgres) -> tuple[Plan, ...]:
    """The plans of ``sql`` for DuckDB and PostgreSQL."""
    _, schema = postgres
    return (
        plan(sql, catalog("main"), REQUEST),
        plan(sql, catalog(schema), PlanRequest(10.0, delta=0.4, dialect="postgres")),
    )


def answers(
    sql: str, duck: duckdb.DuckDBPyConnection, postgres: Postgres
) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """The released rows (no noise) on DuckDB and on PostgreSQL."""
    on_duck, on_pg = released(sql, duck, postgres)
    conn, _ = postgres
    duck_rows = duck.execute(in_key_order(on_duck)).fetchall()
    pg_rows = [tuple(r) for r in conn.execute(in_key_order(on_pg).encode()).fetchall()]
    return (
        list(on_duck.release(duck_rows, ZeroNoise()).rows),
        list(on_pg.release(pg_rows, ZeroNoise()).rows),
    )


def native(sql: str, postgres: Postgres) -> list[tuple[object, ...]]:
    """What PostgreSQL answers for the analyst's SQL itself."""
    conn, _ = postgres
    return [tuple(r) for r in conn.execute(sql.encode()).fetchall()]


KEYS = [
    "nullif(name, 'Anna')",
    "nullif(name, '')",
    "nullif(stay, 0)",
    "nullif(stay, 2.5)",  # numeric in PostgreSQL: the same numbers
    "nullif(stay, NULL)",
    "nullif(nullif(stay, 0), 3)",
    "left(name, 0)",
    "left(name, 1)",
    "left(name, 2)",
    "left(name, 40)",
    "concat(name, '-', stay)",
    "concat(NULL, name)",
    "concat(code, name, -5, NULL)",
    "concat(left(name, 1), nullif(code, 'A'))",
    "concat(stay, '/', CAST(flag AS TEXT))",
    "nullif(concat(code, name), '')",
    "lower(concat(name, code))",
    "CASE WHEN nullif(stay, 0) > 2 THEN left(name, 1) ELSE concat(code) END",
    # code has a public domain: so has nullif of it (NULL for the rows of 'A').
    "nullif(code, 'A')",
    "nullif(code, code)",
]


@pytest.mark.parametrize("key", KEYS)
def test_key_is_what_postgresql_computes(
    key: str, duck: duckdb.DuckDBPyConnection, postgres: Postgres
) -> None:
    on_duck, on_pg = answers(f"SELECT {key}, COUNT(*) FROM notes GROUP BY 1", duck, postgres)
    assert repr(on_duck) == repr(on_pg)  # the same values, of the same types
    truth = native(f"SELECT {key}, COUNT(*) FROM notes GROUP BY 1", postgres)
    # A public domain's empty groups are released too (a count of 0 without noise).
    assert {k: n for k, n in on_duck if n} == dict(truth)


def test_a_key_of_a_public_domain_needs_no_delta() -> None:
    made = plan(
        "SELECT nullif(code, 'A') AS c, COUNT(*) FROM notes GROUP BY 1",
        catalog("main"),
        PlanRequest(1.0),  # δ = 0
    )
    assert made.selection is None
    assert made.keys[0].domain == ("B", "Ü", None)


CONDITIONS = [
    "nullif(stay, 0) > 1",
    "nullif(stay, 0) IS NULL",
    "nullif(stay, 2.5) = 2",
    "nullif(name, '') IS NULL",
    "nullif(NULL, stay) IS NULL",
    "nullif(code, 'A') IN ('B', 'Ü')",
    "left(name, 1) = 'é'",
    "left(name, 2) = 'e\u0301'",
    "left(name, 1) = '👍'",
    "left(name, 0) = ''",
    "left(name, 3) LIKE '  A%'",
    "concat(name, stay) = 'Anna3'",
    "concat(name) = ''",  # NULL and '': concat is never NULL
    "concat(NULL, NULL) = ''",
    "concat(code, '/', stay) LIKE 'A/%'",
    "length(concat(name, code)) > 4",
]


@pytest.mark.parametrize("condition", CONDITIONS)
def test_condition_is_what_postgresql_computes(
    condition: str, duck: duckdb.DuckDBPyConnection, postgres: Postgres
) -> None:
    for sql in (
        f"SELECT COUNT(*) FROM notes WHERE {condition}",
        f"SELECT COUNT(*) FILTER (WHERE {condition}) FROM notes",
    ):
        on_duck, on_pg = answers(sql, duck, postgres)
        truth = native(sql, postgres)
        assert on_duck == on_pg == truth, sql


AGGREGATES = [
    "SUM(nullif(stay, 0))",
    "SUM(nullif(stay, 3))",
    "SUM(nullif(cost, 2.5))",
    "AVG(nullif(stay, 0))",
    "COUNT(nullif(stay, 0))",
    "COUNT(nullif(name, ''))",
    "COUNT(left(name, 1))",
    "COUNT(concat(name))",
]


@pytest.mark.parametrize("aggregate", AGGREGATES)
def test_aggregate_is_what_postgresql_computes(
    aggregate: str, duck: duckdb.DuckDBPyConnection, postgres: Postgres
) -> None:
    sql = f"SELECT {aggregate} FROM notes"
    on_duck, on_pg = answers(sql, duck, postgres)
    ((truth,),) = native(sql, postgres)
    for ((value,),) in (on_duck, on_pg):
        assert isinstance(value, (int, float))
        assert math.isclose(value, float(truth), abs_tol=1e-9), (sql, value, truth)


def test_nullif_inside_an_aggregate_has_the_bounds_of_its_value() -> None:
    def spec(sql: str) -> tuple[Interval | None, int]:
        made = plan(sql, catalog("main"), REQUEST)
        measured = made.measurements[0]
        return measured.spec.bounds, measured.spec.unit_bound

    stay = spec("SELECT SUM(stay) FROM notes")
    assert stay[0] == Interval(-20, 30, True)
    assert spec("SELECT SUM(nullif(stay, 0)) FROM notes") == stay
    assert spec("SELECT SUM(nullif(stay, cost)) FROM notes") == stay
    assert spec("SELECT SUM(nullif(cost, 2.5)) FROM notes") == spec("SELECT SUM(cost) FROM notes")


def test_names_are_postgresqls(duck: duckdb.DuckDBPyConnection, postgres: Postgres) -> None:
    """The released columns are named as PostgreSQL names them: nullif, left, concat."""
    sql = (
        "SELECT nullif(name, 'x'), left(name, 1), concat(name, code), nullif(stay, 0) AS s, "
        "COUNT(*), SUM(nullif(stay, 0)) FROM notes GROUP BY 1, 2, 3, 4"
    )
    conn, _ = postgres
    described = conn.execute(sql.encode()).description
    assert described is not None
    expected = [c.name for c in described]
    assert expected == ["nullif", "left", "concat", "s", "count", "sum"]
    for made in released(sql, duck, postgres):
        assert sqlglot.parse_one(made.post_sql, read="duckdb").named_selects == expected


REFUSED = [
    ("left(name, -1) = 'a'", "LEFT(name, -1) in WHERE: left(s, n)", "a negative n"),
    ("left(name, stay) = 'a'", "LEFT(name, stay) in WHERE", "a constant whole number"),
    ("left(name, '2') = 'a'", "LEFT(name, '2') in WHERE", "a constant whole number"),
    ("left(name, 2.5) = 'a'", "LEFT(name, 2.5) in WHERE", "a constant whole number"),
    ("left(name, 2147483648) = 'a'", "LEFT(name, 2147483648)", "at most 2147483647"),
    ("left(stay, 1) = '1'", "LEFT(stay, 1) in WHERE: left() needs a text", "integer column"),
    ("concat(name, flag) = 'a'", "CONCAT(name, flag) in WHERE", "flag is a boolean column"),
    ("concat(name, cost) = 'a'", "CONCAT(name, cost) in WHERE", "cost is a real"),
    ("concat(day, name) = 'a'", "CONCAT(day, name) in WHERE", "day is a date column"),
    ("concat(stay > 1) = 'a'", "CONCAT(stay > 1) in WHERE", "is not known to be one"),
    ("concat(name, 2.5) = 'a'", "CONCAT(name, 2.5) in WHERE", "is not known to be one"),
    ("nullif(name, 5) = 'a'", "name = 5 in WHERE compares values of different types", ""),
    ("lower(nullif(stay, 0)) = 'a'", "LOWER(NULLIF(stay, 0)) in WHERE: lower()", ""),
    ("nullif(name, 'x') + 1 > 2", "NULLIF(name, 'x') + 1 in WHERE", ""),
    ("concat(left(name, 1), cost) = 'a'", "CONCAT(LEFT(name, 1), cost) in WHERE", "cost"),
]


@pytest.mark.parametrize(("condition", "message", "words"), REFUSED)
def test_refused_with_the_analysts_sql(condition: str, message: str, words: str) -> None:
    with pytest.raises(Rejected) as refused:
        plan(f"SELECT COUNT(*) FROM notes WHERE {condition}", catalog("main"), REQUEST)
    assert message in refused.value.message
    assert words in refused.value.message
    assert "CASE WHEN" not in refused.value.message and "SUBSTRING" not in refused.value.message


def test_concat_of_a_value_both_engines_write_differently_hints_at_a_cast() -> None:
    with pytest.raises(Rejected) as refused:
        plan("SELECT concat(flag), COUNT(*) FROM notes GROUP BY 1", catalog("main"), REQUEST)
    assert "t or f" in refused.value.message
    assert refused.value.hint is not None and "CAST(" in refused.value.hint


def test_nested_nullifs_that_would_grow_too_large_are_refused() -> None:
    value = "stay"
    for _ in range(20):  # each level writes its value twice: 2^20 copies of stay
        value = f"nullif({value}, 1)"
    with pytest.raises(Rejected) as refused:
        plan(f"SELECT COUNT(*) FROM notes WHERE {value} > 2", catalog("main"), REQUEST)
    assert refused.value.sqlstate == "54001"
    assert "nested too deeply" in refused.value.message


def test_without_delta_a_key_from_the_data_names_the_function() -> None:
    with pytest.raises(Rejected) as refused:
        plan(
            "SELECT left(name, 1), COUNT(*) FROM notes GROUP BY 1", catalog("main"), PlanRequest(1)
        )
    assert refused.value.message.startswith("GROUP BY LEFT(name, 1) has no public domain")
    with pytest.raises(Rejected) as refused:
        plan(
            "SELECT nullif(stay, 0), COUNT(*) FROM notes GROUP BY 1",
            catalog("main"),
            PlanRequest(1),
        )
    assert "GROUP BY NULLIF(stay, 0) has no public domain" in refused.value.message
    assert "[tables.notes.columns.stay]" in refused.value.message


def test_nested_nullifs_are_bounded_in_depth_for_the_whole_statement() -> None:
    """Each expression under its size limit, but many of them: the depth is bounded."""
    value = "stay"
    for _ in range(5):
        value = f"nullif({value}, 1)"
    with pytest.raises(Rejected) as refused:
        plan(f"SELECT COUNT(*) FROM notes WHERE {value} > 2", catalog("main"), REQUEST)
    assert refused.value.sqlstate == "54001"
    made = plan(
        f"SELECT COUNT(*) FROM notes WHERE {value.removeprefix('nullif(')[:-4]} > 2",
        catalog("main"),
        REQUEST,
    )
    assert made.sql


def test_concat_ws_is_not_taken_for_concat() -> None:
    """sqlglot's ConcatWs is a Concat: it was computed as concat('-', name, code)."""
    for where in ("WHERE concat_ws('-', name, code) = 'Anna-A'", "GROUP BY concat_ws('-', name)"):
        with pytest.raises(Rejected) as refused:
            plan(f"SELECT COUNT(*) FROM notes {where}", catalog("main"), REQUEST)
        assert "concat_ws" in refused.value.message.lower()


def test_nullif_of_a_domain_leaves_out_only_a_value_equal_on_both_engines() -> None:
    """1.0000000000000000001 is 1 to a double but not to PostgreSQL's numeric: the domain
    keeps 1 (a key without rows is released as a noisy 0; a key left out would drop rows)."""
    numbers = build_catalog(
        {"t": {"pid": ColumnType.INTEGER, "k": ColumnType.INTEGER}},
        {"t": TablePolicy(privacy_unit="pid", columns={"k": ColumnPolicy(domain=[1, 2])})},
        schema="main",
    )
    for other, domain in (("1.0000000000000000001", (1, 2, None)), ("1", (2, None))):
        made = plan(
            f"SELECT nullif(k, {other}) AS n, COUNT(*) FROM t GROUP BY 1", numbers, PlanRequest(1)
        )
        assert made.keys[0].domain == domain
