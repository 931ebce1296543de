"""GROUP BY keys from the data beyond plain columns (rewriter.passes.data_keys).

Each accepted form is planned with δ > 0, its bounded SQL run on DuckDB and on PostgreSQL
(in a session whose TimeZone is far from UTC), and the groups released without noise must
be identical on both engines — the same values, of the same Python types — and equal to a
computation in Python. The data holds what could trip a row-level expression: NULL, NaN,
±infinity, values beyond the declared bounds, tiny reals, negative numbers for truncation
and rounding, dates and timestamps at and beyond the years a client can represent. A
second table holds dates and timestamps that psycopg cannot fetch and DuckDB returns as
other values (±infinity, years after 9999 and BC, and dates too large for a timestamp):
every key made from them must be NULL for them on both engines, and fetching it must not
fail.
Forms that could fail on a value, or that the engines compute differently, are refused.
"""

from __future__ import annotations

import datetime as dt
import math
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

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
from tests.rewriter.coupling import in_key_order
from tests.rewriter.noise import ZeroNoise

COLUMNS = {
    "patient_id": ColumnType.INTEGER,
    "department": ColumnType.TEXT,
    "cost": ColumnType.FLOAT,
    "stay": ColumnType.INTEGER,
    "price": ColumnType.DECIMAL,
    "ward": ColumnType.INTEGER,
    "visit_date": ColumnType.DATE,
    "due_date": ColumnType.DATE,
    "seen_at": ColumnType.TIMESTAMP,
}
POLICY = TablePolicy(
    privacy_unit="patient_id",
    max_rows_per_unit=3,
    max_groups_per_unit=2,
    columns={
        "cost": ColumnPolicy(lower=-100, upper=100),
        "stay": ColumnPolicy(lower=-20, upper=30),
        "price": ColumnPolicy(lower=0, upper=1000),
    },
)
CREATE = (
    "CREATE TABLE {schema}.stays (patient_id BIGINT, department VARCHAR, "
    "cost DOUBLE PRECISION, stay INTEGER, price NUMERIC(12, 2), ward INTEGER, "
    "visit_date DATE, due_date DATE, seen_at TIMESTAMP)"
)


EVENT_COLUMNS = {
    "patient_id": ColumnType.INTEGER,
    "birth_date": ColumnType.DATE,
    "logged_at": ColumnType.TIMESTAMP,
}
EVENT_POLICY = TablePolicy(privacy_unit="patient_id", max_rows_per_unit=3, max_groups_per_unit=2)
CREATE_EVENTS = (
    "CREATE TABLE {schema}.events (patient_id BIGINT, birth_date DATE, logged_at TIMESTAMP)"
)


def catalog(schema: str) -> Catalog:
    return build_catalog(
        {"stays": COLUMNS, "events": EVENT_COLUMNS},
        {"stays": POLICY, "events": EVENT_POLICY},
        schema=schema,
    )


@dataclass(frozen=True)
class Stay:
    """One row's values; dates and timestamps as SQL text ('infinity', year 12000, …)."""

    department: str | None
    cost: float | None
    stay: int | None
    price: str | None
    visit_date: str | None
    due_date: str | None
    seen_at: str | None


BASE = [
    Stay("Cardio", 12.5, 15, "123.45", "2024-03-15", "2024-03-15", "2024-03-15 10:11:12.345678"),
    Stay("cardio ", -3.0, -15, "0.50", "2024-12-31", "2024-12-31", "2024-12-31 23:59:59.999999"),
    Stay(None, math.nan, None, None, None, None, None),
    Stay("Neuro", math.inf, 40, "5000.00", "2000-02-29", "infinity", "infinity"),
    Stay("  Ortho", -250.0, -99, "-5.00", "1999-01-03", "1999-01-03", "0001-01-01 00:00:00"),
    Stay("ECHO", 2.25, 7, "999.99", "9999-12-31", "9999-12-31", "9999-12-31 23:59:59.999999"),
    Stay("x", 1e-300, 0, "0.00", "12000-01-01", "12000-01-01", "-infinity"),
    Stay("Peds", -2.25, -7, "100.00", "0001-01-01", "0001-01-03", "2000-02-29 00:00:00"),
    Stay("Peds", -math.inf, 3, "1000.00", "2023-01-01", "2023-01-01", "2023-01-01 00:00:00"),
]
COPIES = 3  # each base row belongs to this many persons, one row each
ROWS = [(1 + i * COPIES + j, stay) for i, stay in enumerate(BASE) for j in range(COPIES)]


def _text(value: object, sql_type: str) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        if math.isnan(value):
            value = "NaN"
        elif math.isinf(value):
            value = "Infinity" if value > 0 else "-Infinity"
        else:
            value = repr(value)
    escaped = str(value).replace("'", "''")
    return f"CAST('{escaped}' AS {sql_type})"


INSERT = "INSERT INTO {schema}.stays VALUES " + ", ".join(
    f"({person}, {_text(s.department, 'VARCHAR')}, {_text(s.cost, 'DOUBLE PRECISION')}, "
    f"{_text(s.stay, 'INTEGER')}, {_text(s.price, 'NUMERIC(12, 2)')}, NULL, "
    f"{_text(s.visit_date, 'DATE')}, {_text(s.due_date, 'DATE')}, "
    f"{_text(s.seen_at, 'TIMESTAMP')})"
    for person, s in ROWS
)


@dataclass(frozen=True)
class Event:
    """A date and a timestamp as PostgreSQL writes them ('infinity', '0044-03-15 BC', …)."""

    birth_date: str | None
    logged_at: str | None


EVENTS = [
    Event("2024-03-15", "2024-03-15 10:11:12.5"),
    Event("infinity", "infinity"),
    Event("-infinity", "-infinity"),
    Event("10000-01-01", "10000-01-01 00:00:00"),
    Event("0044-03-15 BC", "0044-03-15 10:00:00 BC"),
    Event("300000-01-01", "200000-06-30 12:00:00"),  # the date: beyond any timestamp
    Event("0001-01-01", "0001-01-01 00:00:00"),
    Event("9999-12-31", "9999-12-31 23:59:59.999999"),
    Event("1999-01-03", "2000-02-29 00:00:00"),
    Event(None, None),
]
EVENT_ROWS = [(1 + i * COPIES + j, e) for i, e in enumerate(EVENTS) for j in range(COPIES)]


def on_duckdb(text: str | None) -> str | None:
    """The same date or timestamp as DuckDB reads it: years BC as negative years, counted
    astronomically (1 BC is year 0)."""
    if text is None or not text.endswith(" BC"):
        return text
    year, rest = text.removesuffix(" BC").split("-", 1)
    return f"-{int(year) - 1:04d}-{rest}"


def insert_events(schema: str, spell: Callable[[str | None], str | None]) -> str:
    return f"INSERT INTO {schema}.events VALUES " + ", ".join(
        f"({person}, {_text(spell(e.birth_date), 'DATE')}, "
        f"{_text(spell(e.logged_at), 'TIMESTAMP')})"
        for person, e in EVENT_ROWS
    )


@pytest.fixture(scope="module")
def duck() -> Iterator[duckdb.DuckDBPyConnection]:
    conn = duckdb.connect(":memory:")
    conn.execute(CREATE.format(schema="main"))
    conn.execute(INSERT.format(schema="main"))
    conn.execute(CREATE_EVENTS.format(schema="main"))
    conn.execute(insert_events("main", on_duckdb))
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[tuple[psycopg.Connection[tuple[object, ...]], str]]:
    """A schema with the rows, and a connection in a session far from UTC (PostgreSQL's
    date_trunc of a date would depend on it)."""
    schema = f"dpproxy_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        try:
            conn.execute(CREATE.format(schema=f'"{schema}"'))
            conn.execute(INSERT.format(schema=f'"{schema}"'))
            conn.execute(CREATE_EVENTS.format(schema=f'"{schema}"'))
            conn.execute(insert_events(f'"{schema}"', lambda text: text))
            conn.execute("SET TimeZone = 'Pacific/Kiritimati'")
            yield conn, schema
        finally:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


REQUEST = PlanRequest(10.0, delta=0.4)  # a low threshold: groups of COPIES persons pass


def released(
    key: str,
    duck: duckdb.DuckDBPyConnection,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
    table: str = "stays",
) -> tuple[Plan, list[tuple[object, ...]], list[tuple[object, ...]]]:
    """The plan (DuckDB's) and the released (key, count) rows on DuckDB and PostgreSQL."""
    sql = f"SELECT COUNT(*) FROM {table} GROUP BY {key}"
    on_duck = plan(sql, catalog("main"), REQUEST)
    conn, schema = postgres
    on_pg = plan(sql, catalog(schema), PlanRequest(10.0, delta=0.4, dialect="postgres"))
    assert on_duck.selection is not None and on_duck.selection.threshold <= COPIES
    duck_rows = duck.execute(in_key_order(on_duck)).fetchall()
    pg_rows = [tuple(r) for r in conn.execute(in_key_order(on_pg).encode()).fetchall()]
    return (
        on_duck,
        list(on_duck.release(duck_rows, ZeroNoise()).rows),
        list(on_pg.release(pg_rows, ZeroNoise()).rows),
    )


# -- Python's computation of each key ------------------------------------------------------

Key = Callable[[Stay], object]
FLUSH = 2.0**-53  # rewriter.underflow.flush_threshold(100): cost's tiny values become 0


def cost(s: Stay) -> float | None:
    """cost as a computed key sees it: NaN and ±infinity NULL, clamped, tiny values 0."""
    if s.cost is None or not math.isfinite(s.cost):
        return None
    if -FLUSH < s.cost < FLUSH:
        return 0.0
    return min(max(s.cost, -100.0), 100.0)


def stay(s: Stay) -> int | None:
    return None if s.stay is None else min(max(s.stay, -20), 30)


def price(s: Stay) -> float | None:
    return None if s.price is None else float(min(max(Decimal(s.price), Decimal(0)), Decimal(1000)))


def of(f: Callable[[float], float], x: float | None) -> float | None:
    """f(x), NULL for NULL, and -0.0 released as 0.0."""
    return None if x is None else f(x) + 0.0


def rounded(x: float | None, exponent: str) -> Decimal | None:
    """Half away from zero, on the decimal value as written (Decimal: ROUND_HALF_UP)."""
    if x is None:
        return None
    return Decimal(repr(x)).quantize(Decimal(exponent), rounding=ROUND_HALF_UP)


def trunc_division(x: int | None, y: int) -> int | None:
    """PostgreSQL's integer division: toward zero."""
    return None if x is None else (-(abs(x) // y) if x < 0 else x // y)


def a_date(text: str | None) -> dt.datetime | None:
    """A date or timestamp a client can represent (years 1 to 9999), else None."""
    if text is None or text.endswith(("infinity", " BC")) or len(text.split("-")[0]) > 4:
        return None
    return dt.datetime.fromisoformat(text)


def truncated(unit: str, text: str | None) -> str | None:
    when = a_date(text)
    if when is None:
        return None
    parts = {
        "second": when.replace(microsecond=0),
        "minute": when.replace(second=0, microsecond=0),
        "hour": when.replace(minute=0, second=0, microsecond=0),
        "day": dt.datetime(when.year, when.month, when.day),
        "week": dt.datetime(when.year, when.month, when.day) - dt.timedelta(days=when.weekday()),
        "month": dt.datetime(when.year, when.month, 1),
        "quarter": dt.datetime(when.year, 3 * ((when.month - 1) // 3) + 1, 1),
        "year": dt.datetime(when.year, 1, 1),
    }
    return parts[unit].isoformat(sep=" ")


def extracted(field: str, text: str | None) -> float | None:
    """EXTRACT as PostgreSQL defines it; NULL outside the years 1 to 9999 (PostgreSQL
    would give ±Infinity for ±infinity, DuckDB NULL; they number the years BC apart)."""
    when = a_date(text)
    if when is None:
        return None
    y = when.year
    iso = when.isocalendar()
    values = {
        "year": y,
        "isoyear": iso.year,
        "quarter": (when.month - 1) // 3 + 1,
        "month": when.month,
        "week": iso.week,
        "day": when.day,
        "dow": when.isoweekday() % 7,
        "isodow": when.isoweekday(),
        "doy": when.timetuple().tm_yday,
        "decade": y // 10,
        "century": (y + 99) // 100,
        "millennium": (y + 999) // 1000,
        "hour": when.hour,
        "minute": when.minute,
    }
    return float(values[field])


def high_cost_bucket(s: Stay) -> float | None:
    """CASE WHEN cost > 5 THEN floor(cost / 10) ELSE stay END: the condition sees the raw
    value (NaN is above every number in SQL), the values their clamped columns."""
    raw = s.cost
    if raw is not None and (math.isnan(raw) or raw > 5):
        return of(lambda c: math.floor(c / 10), cost(s))
    clamped = stay(s)
    return None if clamped is None else float(clamped)


def on_stay(f: Callable[[int], object]) -> Key:
    """f of the clamped stay; NULL for NULL."""

    def key(s: Stay) -> object:
        value = stay(s)
        return None if value is None else f(value)

    return key


def on_text(f: Callable[[str], object]) -> Key:
    """f of the department; NULL for NULL."""
    return lambda s: None if s.department is None else f(s.department)


def half_away(exponent: str, value: Callable[[Stay], float | int | None]) -> Key:
    """round(x, d), as a number of x's type."""

    def key(s: Stay) -> object:
        x = value(s)
        found = rounded(x, exponent)
        if found is None:
            return None
        return int(found) if isinstance(x, int) else float(found) + 0.0

    return key


def cost_and_stay(s: Stay) -> float | None:
    """cost / 4 + stay, both clamped."""
    c, n = cost(s), stay(s)
    return None if c is None or n is None else c / 4 + n + 0.0


DATE_FIELDS = ("year", "quarter", "month", "day", "dow", "isodow", "doy")
FORMS: list[tuple[str, Key, str]] = [
    # Dates and times: TIMESTAMP whatever the column's type and the session's time zone.
    *[
        (f"date_trunc('{u}', visit_date)", lambda s, u=u: truncated(u, s.visit_date), "TIMESTAMP")
        for u in ("day", "week", "month", "quarter", "year")
    ],
    ("date_trunc('months', due_date)", lambda s: truncated("month", s.due_date), "TIMESTAMP"),
    *[
        (f"date_trunc('{u}', seen_at)", lambda s, u=u: truncated(u, s.seen_at), "TIMESTAMP")
        for u in ("second", "minute", "hour", "day", "week", "month", "year")
    ],
    *[
        (f"EXTRACT({f} FROM visit_date)", lambda s, f=f: extracted(f, s.visit_date), "DOUBLE")
        for f in (*DATE_FIELDS, "decade", "century", "millennium")
    ],
    # Casts to a date or a timestamp (BI tools: CAST(date_trunc('month', d) AS DATE)).
    ("CAST(due_date AS DATE)", lambda s: a_day(s.due_date), "DATE"),
    ("CAST(seen_at AS DATE)", lambda s: a_day(s.seen_at), "DATE"),
    ("CAST(due_date AS TIMESTAMP)", lambda s: a_time(s.due_date), "TIMESTAMP"),
    ("CAST(seen_at AS TIMESTAMP)", lambda s: a_time(s.seen_at), "TIMESTAMP"),
    *[
        (
            f"date_trunc('{u}', due_date)::date",
            lambda s, u=u: a_day(truncated(u, s.due_date)),
            "DATE",
        )
        for u in ("day", "week", "month", "quarter", "year")
    ],
    (
        "CAST(date_trunc('week', seen_at) AS DATE)",
        lambda s: a_day(truncated("week", s.seen_at)),
        "DATE",
    ),
    (
        "CAST(date_trunc('month', visit_date) AS TIMESTAMP)",
        lambda s: truncated("month", s.visit_date),
        "TIMESTAMP",
    ),
    (
        "CAST(date_trunc('minute', seen_at) AS TIMESTAMP)",
        lambda s: truncated("minute", s.seen_at),
        "TIMESTAMP",
    ),
    (
        "CAST(date_trunc('MONTH', CAST(due_date AS DATE)) AS DATE)",
        lambda s: a_day(truncated("month", s.due_date)),
        "DATE",
    ),
    (
        "date_trunc('quarter', CAST(due_date AS TIMESTAMP))",
        lambda s: truncated("quarter", s.due_date),
        "TIMESTAMP",
    ),
    (
        "EXTRACT(hour FROM CAST(seen_at AS TIMESTAMP))",
        lambda s: extracted("hour", s.seen_at),
        "DOUBLE",
    ),
    (
        "CAST(CAST(seen_at AS DATE) AS TIMESTAMP)",
        lambda s: truncated("day", s.seen_at),
        "TIMESTAMP",
    ),
    (
        "coalesce(CAST(date_trunc('year', due_date) AS DATE), CAST('1900-01-01' AS DATE))",
        lambda s: a_day(truncated("year", s.due_date)) or "1900-01-01",
        "DATE",
    ),
    *[
        (f"EXTRACT({f} FROM seen_at)", lambda s, f=f: extracted(f, s.seen_at), "DOUBLE")
        for f in ("hour", "minute")
    ],
    # Arithmetic and rounding on clamped values.
    ("floor(cost / 10) * 10", lambda s: of(lambda c: math.floor(c / 10) * 10, cost(s)), "DOUBLE"),
    ("ceil(cost / 10)", lambda s: of(lambda c: math.ceil(c / 10), cost(s)), "DOUBLE"),
    ("stay / 7", on_stay(lambda n: trunc_division(n, 7)), "BIGINT"),
    ("(stay + 1) / -4", on_stay(lambda n: -(trunc_division(n + 1, 4) or 0)), "BIGINT"),
    ("round(cost, 1)", half_away("0.1", cost), "DOUBLE"),
    ("round(cost)", half_away("1", cost), "DOUBLE"),
    ("round(stay, -1)", half_away("1E1", stay), "BIGINT"),
    (
        "floor(price / 100) * 100",
        lambda s: of(lambda p: math.floor(p / 100) * 100, price(s)),
        "DOUBLE",
    ),
    ("stay * 2 + 1", on_stay(lambda n: n * 2 + 1), "BIGINT"),
    ("abs(stay - 5)", on_stay(lambda n: abs(n - 5)), "BIGINT"),
    ("cost / 4 + stay", cost_and_stay, "DOUBLE"),
    ("CASE WHEN cost > 5 THEN floor(cost / 10) ELSE stay END", high_cost_bucket, "DOUBLE"),
    # CASE and COALESCE with values that are not constants.
    (
        "CASE WHEN stay > 3 THEN department ELSE 'other' END",
        lambda s: s.department if s.stay is not None and s.stay > 3 else "other",
        "VARCHAR",
    ),
    (
        "coalesce(department, 'none')",
        lambda s: "none" if s.department is None else s.department,
        "VARCHAR",
    ),
    ("coalesce(stay, 0)", lambda s: 0 if s.stay is None else s.stay, "BIGINT"),
    ("greatest(stay, 0)", lambda s: 0 if s.stay is None else max(s.stay, 0), "BIGINT"),
    # Rewritten, GREATEST and LEAST still skip NULL arguments on DuckDB as on PostgreSQL.
    ("greatest(stay * 2, 0)", lambda s: max(2 * (stay(s) or 0), 0), "BIGINT"),
    (
        "least(date_trunc('year', seen_at), CAST('2020-06-01' AS TIMESTAMP))",
        lambda s: min(truncated("year", s.seen_at) or "2020-06-01 00:00:00", "2020-06-01 00:00:00"),
        "TIMESTAMP",
    ),
    (
        "coalesce(date_trunc('month', due_date), CAST('1900-01-01' AS TIMESTAMP))",
        lambda s: truncated("month", s.due_date) or "1900-01-01 00:00:00",
        "TIMESTAMP",
    ),
    # Text.
    ("lower(department)", on_text(str.lower), "VARCHAR"),
    ("upper(trim(department))", on_text(lambda d: d.strip().upper()), "VARCHAR"),
    ("substring(department, 2, 3)", on_text(lambda d: d[1:4]), "VARCHAR"),
    ("department || '!'", on_text(lambda d: d + "!"), "VARCHAR"),
    ("CAST(stay / 7 AS TEXT)", on_stay(lambda n: str(trunc_division(n, 7))), "VARCHAR"),
]


@pytest.mark.parametrize(("key", "python", "sql_type"), FORMS, ids=[f[0] for f in FORMS])
def test_key_is_the_same_on_both_engines_and_in_python(
    key: str,
    python: Key,
    sql_type: str,
    duck: duckdb.DuckDBPyConnection,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> None:
    made, on_duck, on_pg = released(key, duck, postgres)
    assert made.released_columns[0] == ("k0", sql_type)
    # The same values of the same types (repr: 0.0 is not -0.0, 2 is not 2.0).
    assert repr(on_duck) == repr(on_pg)
    expected = Counter(python(s) for _, s in ROWS)
    assert {value: count for value, count in on_duck} == expected
    assert len(on_duck) == len(expected)
    for value, _ in on_duck:
        assert value is None or type(value) is _PYTHON_TYPES[sql_type]
        if isinstance(value, float) and value == 0:
            assert math.copysign(1.0, value) == 1.0  # -0.0 is released as 0.0


_PYTHON_TYPES = {"BIGINT": int, "DOUBLE": float, "VARCHAR": str, "TIMESTAMP": str, "DATE": str}


def a_day(text: str | None) -> str | None:
    when = a_date(text)
    return None if when is None else when.date().isoformat()


def a_time(text: str | None) -> str | None:
    when = a_date(text)
    return None if when is None else when.isoformat(sep=" ")


EventKey = Callable[[Event], object]
YEAR_FIELDS = ("year", "decade", "century", "millennium")
EVENT_FORMS: list[tuple[str, EventKey, str]] = [
    ("birth_date", lambda e: a_day(e.birth_date), "DATE"),
    ("logged_at", lambda e: a_time(e.logged_at), "TIMESTAMP"),
    # The year 300000 is a date, and no timestamp: the cast would fail.
    ("CAST(birth_date AS TIMESTAMP)", lambda e: a_time(e.birth_date), "TIMESTAMP"),
    ("CAST(birth_date AS DATE)", lambda e: a_day(e.birth_date), "DATE"),
    ("CAST(logged_at AS DATE)", lambda e: a_day(e.logged_at), "DATE"),
    (
        "CAST(date_trunc('month', birth_date) AS DATE)",
        lambda e: a_day(truncated("month", e.birth_date)),
        "DATE",
    ),
    (
        "CAST(date_trunc('year', logged_at) AS DATE)",
        lambda e: a_day(truncated("year", e.logged_at)),
        "DATE",
    ),
    (
        "date_trunc('week', CAST(birth_date AS TIMESTAMP))",
        lambda e: truncated("week", e.birth_date),
        "TIMESTAMP",
    ),
    *[
        (f"EXTRACT({f} FROM birth_date)", lambda e, f=f: extracted(f, e.birth_date), "DOUBLE")
        for f in YEAR_FIELDS
    ],
    *[
        (f"EXTRACT({f} FROM logged_at)", lambda e, f=f: extracted(f, e.logged_at), "DOUBLE")
        for f in YEAR_FIELDS
    ],
    (
        "greatest(birth_date, CAST('2000-01-01' AS DATE))",
        lambda e: max(a_day(e.birth_date) or "2000-01-01", "2000-01-01"),
        "DATE",
    ),
    (
        "coalesce(logged_at, CAST('1900-01-01 00:00:00' AS TIMESTAMP))",
        lambda e: a_time(e.logged_at) or "1900-01-01 00:00:00",
        "TIMESTAMP",
    ),
    (
        # The condition sees the raw value ('infinity' is later than 2000); the value is
        # NULL all the same.
        "CASE WHEN logged_at > CAST('2000-01-01' AS TIMESTAMP) THEN logged_at END",
        lambda e: None if (a_time(e.logged_at) or "") < "2000-01-01" else a_time(e.logged_at),
        "TIMESTAMP",
    ),
]


@pytest.mark.parametrize(
    ("key", "python", "sql_type"), EVENT_FORMS, ids=[f[0] for f in EVENT_FORMS]
)
def test_dates_a_client_cannot_represent_are_released_as_null(
    key: str,
    python: EventKey,
    sql_type: str,
    duck: duckdb.DuckDBPyConnection,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> None:
    """±infinity, years after 9999 and years BC: psycopg cannot fetch them (PostgreSQL),
    DuckDB returns other values for them (the largest date for infinity, text for the
    rest), and EXTRACT of a year differs (±Infinity or NULL; 44 BC as -44 or -43). The
    key is NULL for them on both engines, and the query does not fail."""
    made, on_duck, on_pg = released(key, duck, postgres, "events")
    assert made.released_columns[0] == ("k0", sql_type)
    assert repr(on_duck) == repr(on_pg)
    expected = Counter(python(e) for _, e in EVENT_ROWS)
    assert {value: count for value, count in on_duck} == expected
    assert len(on_duck) == len(expected)
    assert all(value is None or type(value) is _PYTHON_TYPES[sql_type] for value, _ in on_duck)


def test_two_computed_keys_together(
    duck: duckdb.DuckDBPyConnection,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> None:
    key = "date_trunc('month', visit_date), stay / 7"
    made, on_duck, on_pg = released(key, duck, postgres)
    assert [t for _, t in made.released_columns[:2]] == ["TIMESTAMP", "BIGINT"]
    assert repr(on_duck) == repr(on_pg)
    expected = Counter(
        (truncated("month", s.visit_date), trunc_division(stay(s), 7)) for _, s in ROWS
    )
    assert {(a, b): n for a, b, n in on_duck} == expected


def test_date_trunc_is_cast_so_both_engines_return_a_plain_timestamp(
    duck: duckdb.DuckDBPyConnection,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> None:
    """PostgreSQL truncates a date as a timestamp with time zone: without the casts, the
    key would depend on the session's TimeZone (the fixture's is UTC+14)."""
    sql = "SELECT COUNT(*) FROM stays GROUP BY date_trunc('month', visit_date)"
    conn, schema = postgres
    on_pg = plan(sql, catalog(schema), PlanRequest(10.0, delta=0.4, dialect="postgres"))
    on_duck = plan(sql, catalog("main"), REQUEST)
    for rows in (
        conn.execute(on_pg.sql.encode()).fetchall(),
        duck.execute(on_duck.sql).fetchall(),
    ):
        values = [row[0] for row in rows if row[0] is not None]
        assert values and all(type(v) is dt.datetime and v.tzinfo is None for v in values)


def test_simple_keys_keep_the_checked_expression_so_the_select_list_can_name_them() -> None:
    made = plan(
        "SELECT coalesce(stay, 0) AS s, lower(department) AS l, "
        "EXTRACT(year FROM visit_date) AS y, COUNT(*) FROM stays GROUP BY 1, 2, 3",
        catalog("main"),
        REQUEST,
    )
    assert [k.sql_type for k in made.keys] == ["BIGINT", "VARCHAR", "DOUBLE"]
    assert made.keys[0].expression.sql() == made.keys[0].written.sql()
    # Text keys are grouped byte by byte (test_key_spelling.py), and selected all the same.
    assert made.keys[1].expression.sql() != made.keys[1].written.sql()
    assert '"k0" AS "s"' in made.post_sql and '"k1" AS "l"' in made.post_sql


def test_a_rewritten_key_can_be_selected() -> None:
    """Select items match keys as written, not as rewritten (guarded, cast, clamped)."""
    made = plan(
        "SELECT date_trunc('month', visit_date) AS m, floor(cost / 10) * 10 AS c, COUNT(*) "
        "FROM stays GROUP BY 1, 2",
        catalog("main"),
        REQUEST,
    )
    assert made.keys[0].expression.sql() != made.keys[0].written.sql()
    assert '"k0" AS "m"' in made.post_sql and '"k1" AS "c"' in made.post_sql


# -- refused -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("patient_id", "one group per person"),
        ("floor(patient_id / 10)", "identifies persons"),
        ("coalesce(patient_id, 0)", "identifies persons"),
        ("date_trunc('century', visit_date)", "date_trunc needs a constant unit"),
        ("date_trunc('decade', seen_at)", "date_trunc needs a constant unit"),
        ("date_trunc('month', seen_at, 'UTC')", "date_trunc needs a constant unit"),
        ("date_trunc('month', department)", "a date or timestamp column"),
        ("EXTRACT(second FROM seen_at)", "between the engines"),
        ("EXTRACT(epoch FROM seen_at)", "between the engines"),
        ("EXTRACT(hour FROM visit_date)", "a date has no hour"),
        ("EXTRACT(year FROM cost)", "a date or timestamp column"),
        ("substring(department, 0, 2)", "constant start of at least 1"),
        ("substring(department, -1)", "constant start of at least 1"),
        ("substring(department, 1, stay)", "substring needs constant whole numbers"),
        ("cost / (stay - 1)", "a divisor in it can be 0"),
        ("stay / stay", "a divisor in it can be 0"),
        ("ward / 7", "no declared bounds"),
        ("floor(ward)", "no declared bounds"),
        ("stay * 100000000 * 100000000", "a step of it can exceed"),
        ("cost * 1e-300 * 1e-300", "underflow"),
        ("round(cost, 20)", "constant whole number d"),
        ("round(cost, stay)", "constant whole number d"),
        ("floor(department)", "not a number"),
        ("CAST(cost AS INTEGER)", "could fail on some values"),
        ("CAST(cost AS TEXT)", "released only for"),
        ("sign(cost)", "released only for"),
        ("length(department)", "released only for"),
        ("'constant'", "non-integer constant in GROUP BY"),  # as in PostgreSQL
        ("CASE WHEN stay > 3 THEN department ELSE stay END", "mixes values of different types"),
        ("coalesce(visit_date, seen_at)", "mixes values of different types"),
        ("coalesce(price, cost)", "compares a decimal column with another column"),
        ("greatest(department, 'x')", "released only for"),
        ("CASE stay WHEN 1 THEN department END", "released only for"),
        ("CASE WHEN cost * 2 > 10 THEN department END", "raw values could overflow"),
        ("floor(cost * random())", "function random\\(\\) is not allowed"),
        ("round(round(round(round(round(round(cost, 1), 1), 1), 1), 1), 1)", "too complex"),
    ],
)
def test_unsafe_or_engine_dependent_keys_are_refused(key: str, words: str) -> None:
    with pytest.raises(Rejected, match=words):
        plan(f"SELECT COUNT(*) FROM stays GROUP BY {key}", catalog("main"), REQUEST)


@pytest.mark.parametrize("key", ["floor(cost / 10) * 10", "date_trunc('month', visit_date)"])
def test_without_delta_a_computed_key_names_the_ways_out(key: str) -> None:
    with pytest.raises(Rejected) as caught:
        plan(f"SELECT COUNT(*) FROM stays GROUP BY {key}", catalog("main"), PlanRequest(1.0))
    message = caught.value.message + " " + (caught.value.hint or "")
    assert "has no public domain" in message
    assert "SET dpproxy.delta" in message


def test_a_decimal_and_another_column_mix_inside_aggregates_where_they_are_cleaned() -> None:
    """Refused in row-level contexts (their common type could overflow there), a decimal
    column beside another column is fine inside an aggregate: both are cleaned to DOUBLE."""
    made = plan(
        "SELECT SUM(COALESCE(price, cost)), AVG(CASE WHEN stay > 2 THEN price ELSE cost END) "
        "FROM stays",
        catalog("main"),
        PlanRequest(1.0),
    )
    assert len(made.measurements) == 3
    with pytest.raises(Rejected, match="compares a decimal column with another column"):
        plan("SELECT COUNT(*) FROM stays WHERE price > cost", catalog("main"), PlanRequest(1.0))


@pytest.mark.parametrize(
    ("twice", "once"),
    [
        ("stay / 7, (stay / 7)", "stay / 7"),
        ("department, department", "department"),
        ("department, 1", "department"),
        ("department, stay, department", "department, stay"),
    ],
)
def test_a_key_listed_twice_groups_as_once(twice: str, once: str) -> None:
    """As in PostgreSQL (GROUP BY a, a is GROUP BY a): the same question, the same SQL."""
    select = "SELECT department, stay, stay / 7, COUNT(*) FROM stays GROUP BY "
    if "stay" not in once:
        select = "SELECT department, COUNT(*) FROM stays GROUP BY "
    if once == "stay / 7":
        select = "SELECT stay / 7, COUNT(*) FROM stays GROUP BY "
    assert plan(select + twice, catalog("main"), REQUEST) == plan(
        select + once, catalog("main"), REQUEST
    )
