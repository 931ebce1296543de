"""PostgreSQL's numeric arithmetic computed by dpproxy (pg_numeric: division, powers,
square roots, compared with the real PostgreSQL 15 on random values), floats shown as
PostgreSQL shows them, and DuckDB's errors read as PostgreSQL's (engine_errors)."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.catalog.engine_errors import postgres_error
from proxy.catalog.pg_numeric import divide, integer_power, numeric_text, square_root
from proxy.catalog.text import pg_text

Connection = psycopg.Connection[tuple[object, ...]]


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[Connection]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


_DECIMALS = st.decimals(
    min_value=Decimal("-1e12"), max_value=Decimal("1e12"), allow_nan=False, places=6
)


@settings(max_examples=150, deadline=None)
@given(_DECIMALS, _DECIMALS.filter(lambda d: d != 0))
def test_numeric_division_is_postgresqls(postgres: Connection, a: Decimal, b: Decimal) -> None:
    theirs = postgres.execute(
        "SELECT (%s::text::numeric / %s::text::numeric)::text", (numeric_text(a), numeric_text(b))
    ).fetchone()
    assert theirs is not None and numeric_text(divide(a, b)) == theirs[0]


@settings(max_examples=60, deadline=None)
@given(_DECIMALS, st.integers(-6, 6))
def test_numeric_integer_powers_and_roots_are_postgresqls(
    postgres: Connection, base: Decimal, exponent: int
) -> None:
    if base == 0 and exponent < 0:
        return
    text = numeric_text(base)
    theirs = postgres.execute(
        "SELECT (%s::text::numeric ^ %s)::text, (sqrt(abs(%s::text::numeric)))::text",
        (text, exponent, text),
    ).fetchone()
    assert theirs is not None
    assert numeric_text(integer_power(base, exponent)) == theirs[0]
    assert numeric_text(square_root(base.copy_abs())) == theirs[1]


@pytest.mark.parametrize(
    "value",
    ["1", "1e15", "1234567890123456", "1e16", "0.0001", "1e-05", "-2.5", "0.1", "1e300",
     "-0", "2.5e-10", "123456789012345", "0.30000000000000004", "1e6", "1234567"],
)  # fmt: skip
def test_floats_are_shown_as_postgresql_shows_them(postgres: Connection, value: str) -> None:
    row = postgres.execute("SELECT %s::float8::text", (value,)).fetchone()
    assert row is not None and pg_text(float(value)) == row[0]
    if abs(float(value)) < 3e38:  # a real
        row = postgres.execute("SELECT %s::float4::text", (value,)).fetchone()
        assert row is not None and pg_text(float(row[0]), real=True) == row[0]


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Invalid Input Error: Division by zero in expression (1 // 0). Use TRY(...)",
         ("22012", "division by zero")),
        ("Out of Range Error: Overflow in addition of INT16 (32767 + 1)!",
         ("22003", "smallint out of range")),
        ("Out of Range Error: Overflow in multiplication of INT64 (9 * 9)!",
         ("22003", "bigint out of range")),
        ("Out of Range Error: Overflow in division of -2147483648 / -1",
         ("22003", "integer out of range")),
        ("Out of Range Error: Overflow on abs(-32768)", ("22003", "smallint out of range")),
        ("Conversion Error: Type INT32 with value 40000 can't be cast because the value is "
         "out of range for the destination type INT16", ("22003", "smallint out of range")),
        ("Conversion Error: Failed to cast decimal value 10000000000 to type INT32",
         ("22003", "integer out of range")),
        ("Conversion Error: Could not convert string 'abc' to INT32",
         ("22P02", 'invalid input syntax for type integer: "abc"')),
        ("Conversion Error: Could not convert string '40000' to INT16",
         ("22003", 'value "40000" is out of range for type smallint')),
        ('Conversion Error: Casting value "12345.678" to type DECIMAL(5,2) failed: value is '
         "out of range!", ("22003", "numeric field overflow")),
        ("Invalid Input Error: Python exception occurred while executing the UDF: "
         "RaisedError: [pg 22012] division by zero [/pg]Traceback (most recent call last):",
         ("22012", "division by zero")),
    ],
)  # fmt: skip
def test_duckdb_errors_read_as_postgresqls(message: str, expected: tuple[str, str]) -> None:
    found = postgres_error(message)
    assert found is not None and (found.sqlstate, found.message) == expected


def test_other_duckdb_errors_stay_dpproxys() -> None:
    assert postgres_error("Binder Error: Referenced column x not found") is None
