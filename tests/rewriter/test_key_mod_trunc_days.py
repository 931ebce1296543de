"""GROUP BY keys found by a tester to be refused (rewriter.passes.numeric_keys,
rewriter.passes.data_keys, rewriter.passes.boolean_text):

- ``birth_year % 10`` and ``mod(x, n)`` of integers ("arithmetic on a column's raw values
  could overflow");
- ``trunc(income / 10000)``, ``trunc(x, d)`` ("has no public domain, and …");
- ``visit_date + 1``, ``visit_date - 1`` ("does arithmetic on visit_date, which is not a
  number");
- ``(cost > 1000)::text`` (no public domain).

Each runs on DuckDB and PostgreSQL, without noise, and gives PostgreSQL's own answer to the
analyst's SQL over a table whose values lie within their bounds; over the tables of
test_data_keys (NaN, ±infinity, values beyond the bounds, tiny reals; dates at and beyond
the years 1 to 9999, ±infinity, BC) each gives the same values on both engines, those of a
computation in Python on the clamped values, and the query does not fail.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import ROUND_DOWN, Decimal

import duckdb
import psycopg
import pytest

from rewriter import (
    Catalog,
    ColumnPolicy,
    ColumnType,
    Plan,
    PlanRequest,
    Rejected,
    TablePolicy,
    build_catalog,
    plan,
)
from tests.postgres_schema import scratch_schema
from tests.rewriter import test_data_keys as extreme
from tests.rewriter.coupling import in_key_order
from tests.rewriter.noise import ZeroNoise

# -- a table within its bounds: PostgreSQL's own answer ------------------------------------

COLUMNS = {
    "patient_id": ColumnType.INTEGER,
    "n": ColumnType.INTEGER,
    "price": ColumnType.DECIMAL,
    "cost": ColumnType.FLOAT,
    "d": ColumnType.DATE,
    "ts": ColumnType.TIMESTAMP,
}
POLICY = TablePolicy(
    privacy_unit="patient_id",
    max_rows_per_unit=1,
    max_groups_per_unit=1,
    columns={
        "n": ColumnPolicy(lower=-50, upper=50),
        "price": ColumnPolicy(lower=-1000, upper=1000),
        "cost": ColumnPolicy(lower=-100, upper=100),
    },
)
CREATE = (
    "CREATE TABLE {schema}.ledger (patient_id BIGINT, n INTEGER, price NUMERIC(10, 3), "
    "cost DOUBLE PRECISION, d DATE, ts TIMESTAMP)"
)
Row = tuple[int | None, str | None, float | None, str | None, str | None]
BASE: list[Row] = [
    (7, "0.290", 2.5, "2024-02-28", "2024-02-28 10:00:00"),
    (-7, "-0.290", -0.5, "2024-02-29", "2024-02-29 23:59:59"),
    (13, "0.570", 0.29, "2023-12-31", "2023-12-31 00:00:00"),
    (-13, "1.150", 99.99, "2000-01-01", "2000-01-01 12:00:00"),
    (0, "2.675", -99.99, "1999-03-01", None),
    (50, "-4.350", 0.0, "2024-01-01", "2024-01-01 00:00:01"),
    (-50, "999.999", 57.3, "2020-02-29", "2020-02-29 06:00:00"),
    (None, "0.001", None, None, None),
    (1, None, -0.29, "2024-12-31", "2024-12-31 23:00:00"),
    (-1, "-0.005", 1.15, "2021-03-01", "2021-03-01 00:00:00"),
    (4, "100.000", -57.3, "2024-03-01", "2024-03-01 00:00:00"),
]
COPIES = 3  # each row belongs to this many persons: a group passes the selection
ROWS = [(1 + i * COPIES + j, *row) for i, row in enumerate(BASE) for j in range(COPIES)]
DELTA = 0.4  # a low threshold: groups of COPIES persons pass (without noise)
Rows = list[tuple[object, ...]]


def ledger_catalog(schema: str) -> Catalog:
    return build_catalog({"ledger": COLUMNS}, {"ledger": POLICY}, schema=schema)


@dataclass
class Ledger:
    duck: duckdb.DuckDBPyConnection
    postgres: psycopg.Connection[tuple[object, ...]]
    schema: str

    def released(self, sql: str, delta: float = DELTA) -> tuple[Plan, Rows, Rows]:
        """DuckDB's plan and the released rows (no noise) on DuckDB and on PostgreSQL."""
        on_duck = plan(sql, ledger_catalog("main"), PlanRequest(10.0, delta=delta))
        on_pg = plan(sql, ledger_catalog(self.schema), PlanRequest(10.0, "postgres", delta=delta))
        if on_duck.selection is not None:
            assert on_duck.selection.threshold <= COPIES
        duck_rows = self.duck.execute(in_key_order(on_duck)).fetchall()
        pg_rows = [tuple(r) for r in self.postgres.execute(in_key_order(on_pg).encode())]
        return (
            on_duck,
            list(on_duck.release(duck_rows, ZeroNoise()).rows),
            list(on_pg.release(pg_rows, ZeroNoise()).rows),
        )

    def native(self, sql: str) -> Rows:
        """PostgreSQL's own answer to ``sql``."""
        return [tuple(r) for r in self.postgres.execute(sql.encode()).fetchall()]


@pytest.fixture(scope="module")
def ledger(pg_dsn: str) -> Iterator[Ledger]:
    marks = ", ".join(["%s"] * 6)
    duck = duckdb.connect(":memory:")
    try:
        duck.execute(CREATE.format(schema="main"))
        duck.executemany(f"INSERT INTO main.ledger VALUES ({marks.replace('%s', '?')})", ROWS)
        with scratch_schema(pg_dsn) as (conn, schema):
            conn.execute(CREATE.format(schema=f'"{schema}"'))
            with conn.cursor() as cur:
                cur.executemany(f'INSERT INTO "{schema}".ledger VALUES ({marks})', ROWS)
            conn.execute(f'SET search_path = "{schema}"')
            yield Ledger(duck, conn, schema)
    finally:
        duck.close()


def _value(value: object) -> object:
    """A key as a comparable Python value: PostgreSQL's numeric and double (trunc of an
    integer is a double there) as a float, an integer as itself, a date as its text."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


#: (key, released type, PostgreSQL's key for the same values where it differs)
LEDGER_KEYS: list[tuple[str, str, str | None]] = [
    # % of integers: the sign of the dividend.
    ("n % 3", "BIGINT", None),
    ("mod(n, -4)", "BIGINT", None),
    ("(n - 7) % 4", "BIGINT", None),
    ("n % 7 * 10 + 1", "BIGINT", None),
    ("(n / 3) % 5", "BIGINT", None),
    # trunc: of an integer (an integer already: PostgreSQL's double holds the same value),
    # of a double, of a numeric to d places.
    ("trunc(n / 4)", "BIGINT", None),
    ("trunc(n)", "BIGINT", None),
    ("trunc(n, -1)", "BIGINT", None),
    ("trunc(n, 2)", "BIGINT", None),
    ("trunc(cost)", "DOUBLE", None),
    ("trunc(cost / 7)", "DOUBLE", None),
    ("trunc(price)", "DOUBLE", None),
    ("trunc(price, 1)", "DOUBLE", None),
    ("trunc(price, 2)", "DOUBLE", None),
    ("trunc(price, -1)", "DOUBLE", None),
    ("trunc(price, -2)", "DOUBLE", None),
    # A date plus or minus days: a date.
    ("d + 1", "DATE", None),
    ("d - 1", "DATE", None),
    ("30 + d", "DATE", None),
    ("d - 366", "DATE", None),
    ("d + -2", "DATE", None),
    ("d + CAST(7 AS INT)", "DATE", None),
    ("CAST(d + 1 AS DATE)", "DATE", None),
    ("CAST(ts AS DATE) - 1", "DATE", None),
    # A condition as text: 'true', 'false', NULL (a public domain).
    ("(cost > 1)::text", "VARCHAR", None),
    ("CAST(n IS NULL AS VARCHAR)", "VARCHAR", None),
    ("(price < 1 AND n > 0)::text", "VARCHAR", None),
]


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("key", "sql_type", "native"), LEDGER_KEYS, ids=[k for k, _, _ in LEDGER_KEYS]
)
def test_key_is_postgresql_s_own_on_both_engines(
    key: str, sql_type: str, native: str | None, ledger: Ledger
) -> None:
    sql = f"SELECT {key} AS k, COUNT(*) FROM ledger GROUP BY 1"
    made, on_duck, on_pg = ledger.released(sql)
    assert made.released_columns[0] == ("k0", sql_type)
    assert repr(on_duck) == repr(on_pg)
    own = ledger.native(f"SELECT {native or key} AS k, COUNT(*) FROM ledger GROUP BY 1")
    expected = {_value(k): n for k, n in own}
    released = {_value(k): n for k, n in on_duck}
    if sql_type == "VARCHAR":  # a public domain: its empty cells are released too, as 0
        assert {k for k, n in released.items() if n == 0} <= {"true", "false", None}
        released = {k: n for k, n in released.items() if n != 0}
    assert released == expected
    assert len(on_duck) >= len(own)


def test_a_condition_as_text_has_a_public_domain() -> None:
    """Released with δ = 0, every cell: 'true', 'false' and NULL (none for a condition
    that is never NULL)."""
    for key, domain in [
        ("(cost > 1000)::text", ("true", "false", None)),
        ("CAST(n IS NULL AS TEXT)", ("true", "false")),
    ]:
        made = plan(
            f"SELECT {key}, COUNT(*) FROM ledger GROUP BY 1",
            ledger_catalog("main"),
            PlanRequest(1.0),
        )
        assert made.selection is None
        assert made.keys[0].domain == domain
        assert made.released_columns[0] == ("k0", "VARCHAR")


# -- extreme values: no failure, the same on both engines, as computed in Python -----------


@pytest.fixture(scope="module")
def duck() -> Iterator[duckdb.DuckDBPyConnection]:
    conn = duckdb.connect(":memory:")
    conn.execute(extreme.CREATE.format(schema="main"))
    conn.execute(extreme.INSERT.format(schema="main"))
    conn.execute(extreme.CREATE_EVENTS.format(schema="main"))
    conn.execute(extreme.insert_events("main", extreme.on_duckdb))
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[tuple[psycopg.Connection[tuple[object, ...]], str]]:
    with scratch_schema(pg_dsn) as (conn, schema):
        conn.execute(extreme.CREATE.format(schema=f'"{schema}"'))
        conn.execute(extreme.INSERT.format(schema=f'"{schema}"'))
        conn.execute(extreme.CREATE_EVENTS.format(schema=f'"{schema}"'))
        conn.execute(extreme.insert_events(f'"{schema}"', lambda text: text))
        conn.execute("SET TimeZone = 'Pacific/Kiritimati'")
        yield conn, schema


def _remainder(x: int, y: int) -> int:
    """PostgreSQL's x % y: the sign of x."""
    return int(math.fmod(x, y))


def _trunc_places(x: float | None, places: int) -> float | None:
    """trunc(x, d) of a double: of the decimal of 15 significant digits it stands for (as
    PostgreSQL's trunc(x::numeric, d))."""
    if x is None:
        return None
    decimal = Decimal(f"{x:.15g}")
    return float(decimal.quantize(Decimal(1).scaleb(-places), rounding=ROUND_DOWN)) + 0.0


def _shifted(text: str | None, days: int) -> str | None:
    """A date plus days, NULL outside the years 1 to 9999 (before or after)."""
    when = extreme.a_date(text)
    if when is None:
        return None
    try:
        return (when.date() + dt.timedelta(days=days)).isoformat()
    except OverflowError:
        return None


StayKey = Callable[[extreme.Stay], object]
STAY_FORMS: list[tuple[str, StayKey, str]] = [
    ("stay % 7", extreme.on_stay(lambda n: _remainder(n, 7)), "BIGINT"),
    ("mod(stay, -4)", extreme.on_stay(lambda n: _remainder(n, -4)), "BIGINT"),
    ("(stay - 5) % 4 + 1", extreme.on_stay(lambda n: _remainder(n - 5, 4) + 1), "BIGINT"),
    ("trunc(stay / 4)", extreme.on_stay(lambda n: extreme.trunc_division(n, 4)), "BIGINT"),
    ("trunc(stay, -1)", extreme.on_stay(lambda n: int(math.trunc(n / 10)) * 10), "BIGINT"),
    ("trunc(cost)", lambda s: extreme.of(math.trunc, extreme.cost(s)), "DOUBLE"),
    ("trunc(price, 1)", lambda s: _trunc_places(extreme.price(s), 1), "DOUBLE"),
    ("visit_date + 1", lambda s: _shifted(s.visit_date, 1), "DATE"),
    ("visit_date - 1", lambda s: _shifted(s.visit_date, -1), "DATE"),
    ("due_date - 30", lambda s: _shifted(s.due_date, -30), "DATE"),
]


@pytest.mark.postgres
@pytest.mark.parametrize(("key", "python", "sql_type"), STAY_FORMS, ids=[f[0] for f in STAY_FORMS])
def test_extreme_values_neither_fail_nor_differ(
    key: str,
    python: StayKey,
    sql_type: str,
    duck: duckdb.DuckDBPyConnection,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> None:
    made, on_duck, on_pg = extreme.released(key, duck, postgres)
    assert made.released_columns[0] == ("k0", sql_type)
    assert repr(on_duck) == repr(on_pg)
    expected = Counter(python(s) for _, s in extreme.ROWS)
    assert dict(on_duck) == expected
    assert len(on_duck) == len(expected)
    for value, _ in on_duck:
        if isinstance(value, float) and value == 0:
            assert math.copysign(1.0, value) == 1.0  # -0.0 is released as 0.0


EventKey = Callable[[extreme.Event], object]
EVENT_FORMS: list[tuple[str, EventKey]] = [
    ("birth_date + 1", lambda e: _shifted(e.birth_date, 1)),
    ("birth_date - 1", lambda e: _shifted(e.birth_date, -1)),
    ("1 + birth_date", lambda e: _shifted(e.birth_date, 1)),
    ("birth_date + 100000", lambda e: _shifted(e.birth_date, 100_000)),
    ("birth_date - 100000", lambda e: _shifted(e.birth_date, -100_000)),
    ("CAST(logged_at AS DATE) + 1", lambda e: _shifted(extreme.a_day(e.logged_at), 1)),
    ("CAST(birth_date + 1 AS DATE)", lambda e: _shifted(e.birth_date, 1)),
]


@pytest.mark.postgres
@pytest.mark.parametrize(("key", "python"), EVENT_FORMS, ids=[f[0] for f in EVENT_FORMS])
def test_dates_beyond_the_years_a_client_reads_give_null(
    key: str,
    python: EventKey,
    duck: duckdb.DuckDBPyConnection,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> None:
    """±infinity, years after 9999 (300000: no timestamp holds it) and BC, and a shift out
    of the years 1 to 9999 (9999-12-31 + 1): NULL on both engines, no failure."""
    made, on_duck, on_pg = extreme.released(key, duck, postgres, "events")
    assert made.released_columns[0] == ("k0", "DATE")
    assert repr(on_duck) == repr(on_pg)
    expected = Counter(python(e) for _, e in extreme.EVENT_ROWS)
    assert dict(on_duck) == expected
    assert len(on_duck) == len(expected)


@pytest.mark.postgres
def test_a_condition_as_text_over_nan_and_infinity(
    duck: duckdb.DuckDBPyConnection,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> None:
    """NaN is above every number on both engines, as in PostgreSQL; ±infinity compare as
    numbers."""
    sql = "SELECT (cost > 10)::text AS k, COUNT(*) FROM stays GROUP BY 1"
    conn, schema = postgres
    answers = []
    for dialect, name in (("duckdb", "main"), ("postgres", schema)):
        made = plan(sql, extreme.catalog(name), PlanRequest(10.0, dialect))
        assert made.selection is None  # a public domain
        bounded = in_key_order(made)
        found = duck.execute(bounded) if dialect == "duckdb" else conn.execute(bounded.encode())
        rows = [tuple(r) for r in found.fetchall()]
        answers.append(sorted(made.release(rows, ZeroNoise()).rows, key=repr))
    assert answers[0] == answers[1]
    raw = [s.cost for _, s in extreme.ROWS]
    expected = Counter(None if c is None else str(math.isnan(c) or c > 10).lower() for c in raw)
    # Every cell of the domain is released, the NULL one (no row here) as a noisy 0.
    assert dict(answers[0]) == {None: 0, **expected}


@pytest.mark.parametrize(
    ("key", "words"),
    [
        # PostgreSQL has no % of a double; a numeric's is exact where a double's is not.
        ("cost % 10", "needs whole-number operands"),
        ("price % 10", "needs whole-number operands"),
        ("stay % 0", "a divisor in it can be 0"),
        ("stay % (stay - 1)", "a divisor in it can be 0"),
        ("ward % 7", "no declared bounds"),
        ("patient_id % 10", "identifies persons"),
        ("trunc(cost, stay)", "trunc\\(x, d\\) needs a constant whole number d"),
        ("trunc(cost, 16)", "trunc\\(x, d\\) needs a constant whole number d"),
        # As in PostgreSQL, which has trunc(numeric, d) only.
        ("trunc(cost, 2)", "trunc\\(double precision, integer\\) does not exist"),
        ("trunc(cost / 7, -1)", "trunc\\(double precision, integer\\) does not exist"),
        ("visit_date + CAST(1 AS BIGINT)", "not a number"),  # PostgreSQL: no date + bigint
        ("trunc(department)", "not a number"),
        # A timestamp plus a number is no timestamp in PostgreSQL.
        ("seen_at + 1", "adds a whole number of days to a date only"),
        ("visit_date + 100001", "more than 100,000 days"),
        ("visit_date + 1.5", "not a number"),
        ("visit_date + stay", "not a number"),
        ("1 - visit_date", "not a number"),
    ],
)
def test_what_cannot_be_computed_safely_is_refused(key: str, words: str) -> None:
    with pytest.raises(Rejected, match=words):
        plan(f"SELECT COUNT(*) FROM stays GROUP BY {key}", extreme.catalog("main"), extreme.REQUEST)


def test_without_delta_a_remainder_names_the_ways_out() -> None:
    with pytest.raises(Rejected, match="has no public domain") as caught:
        plan(
            "SELECT COUNT(*) FROM stays GROUP BY stay % 7",
            extreme.catalog("main"),
            PlanRequest(1.0),
        )
    assert "SET dpproxy.delta" in (caught.value.hint or "")
