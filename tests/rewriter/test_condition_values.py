"""``rewriter.condition_values``: a condition's value from its known parts, as PostgreSQL
computes it (each constant condition is checked against PostgreSQL 15), and UNKNOWN where
the unknown parts could change it."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
import sqlglot
from sqlglot import exp

from rewriter.condition_values import UNKNOWN, Result, evaluate

CONSTANT = [
    "'a' = 'a'",
    "'a' <> 'A'",
    "'a' = NULL",
    "NULL IS NULL",
    "'a' IS NOT NULL",
    "NULL IS DISTINCT FROM NULL",
    "'a' IS DISTINCT FROM NULL",
    "'a' IS NOT DISTINCT FROM 'a'",
    "'b' IN ('a', 'b')",
    "'c' IN ('a', NULL)",
    "'a' IN ('a', NULL)",
    "'c' NOT IN ('a', NULL)",
    "NULL IN ('a')",
    "1 IN (2, 3)",
    "1 = 1.0",
    "1.5 = 1.50",
    "2 = 2.0000000000000000000001",
    "-1 < 0",
    "3 >= 3",
    "2 BETWEEN 1 AND 3",
    "2 BETWEEN 3 AND 1",
    "NULL BETWEEN 1 AND 3",
    "2 BETWEEN NULL AND 1",
    "true = false",
    "false < true",
    "(1 = 1) IS TRUE",
    "NULL IS NOT TRUE",
    "NULL IS FALSE",
    "NOT NULL::boolean IS NULL",
    "CAST(NULL AS INTEGER) = 1",
    "NOT (1 = 2)",
    "false AND NULL",
    "true AND NULL",
    "true OR NULL",
    "false OR NULL",
    "'abc' LIKE 'a%'",
    "'abc' LIKE 'a_'",
    "'abc' LIKE '_b_'",
    "'a%' LIKE 'a\\%'",
    "'ab' LIKE 'a\\%'",
    "'a_b' LIKE 'a\\_b'",
    "'axb' LIKE 'a\\_b'",
    "'a\\b' LIKE 'a\\\\b'",
    "'a.b' LIKE 'a.b'",
    "'a\nb' LIKE 'a_b'",
    "'' LIKE '%'",
    "'abc' NOT LIKE 'a%'",
    "'ABC' ILIKE 'a%'",
    "'ABC' NOT ILIKE 'b%'",
    "NULL LIKE 'a'",
    "'é' LIKE '_'",
    "'a'::text = 'a'",
    "CAST('b' AS VARCHAR) = 'b'",
]


def _condition(sql: str) -> exp.Expr:
    parsed = sqlglot.parse_one(f"SELECT {sql}", read="postgres")
    if not isinstance(parsed, exp.Select):
        raise TypeError(sql)
    found: exp.Expr = parsed.expressions[0]
    return found


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


@pytest.mark.parametrize("condition", CONSTANT)
def test_a_constant_condition_is_postgresqls(
    condition: str, postgres: psycopg.Connection[tuple[object, ...]]
) -> None:
    row = postgres.execute(f"SELECT {condition}".encode()).fetchone()
    assert row is not None
    assert evaluate(_condition(condition), {}) == row[0]


@pytest.mark.parametrize(
    "condition",
    [
        "'a' < 'b'",  # texts in order follow the collation
        "'a' BETWEEN 'a' AND 'b'",
        "'a' LIKE 'a\\'",  # an error in PostgreSQL
        "'É' ILIKE 'é'",  # case beyond ASCII follows the locale
        "'1' = 1",
        "lower('a') = 'a'",
        "'a'::varchar(1) = 'a'",
        "1 IN (SELECT 1)",
    ],
)
def test_what_may_differ_or_fail_is_unknown(condition: str) -> None:
    assert evaluate(_condition(condition), {}) is UNKNOWN


def _with_column(sql: str, value: object) -> Result:
    """``x`` known to be ``value``; ``y`` unknown."""
    condition = _condition(sql)
    known = {id(c): value for c in condition.find_all(exp.Column) if c.name == "x"}
    return evaluate(condition, known)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("condition", "value", "expected"),
    [
        ("x = 'a' AND y > 1", "b", False),
        ("x = 'a' AND y > 1", "a", UNKNOWN),
        ("x = 'a' OR y > 1", "a", True),
        ("x = 'a' OR y > 1", "b", UNKNOWN),
        ("(x = 'a' AND y > 1) OR x = 'b'", "c", False),
        ("NOT (x = 'a' AND y > 1)", "b", True),
        ("NOT (x = 'a' AND y > 1)", "a", UNKNOWN),
        ("x IN ('a', y)", "a", True),
        ("x IN ('a', y)", "b", UNKNOWN),
        ("x <> 'a'", None, None),
        ("x IS NULL OR y", None, True),
        ("x = y", "a", UNKNOWN),
        ("x = 1.5", 1.5, True),
        ("x = 0.1", 0.1, True),
        ("x = 0.10000000000000001", 0.1, UNKNOWN),
        ("x = 2", 2.0, True),
        ("x > 1.5", 2, True),
    ],
)
def test_unknown_parts(condition: str, value: object, expected: Result) -> None:
    found = _with_column(condition, value)
    assert found == expected and type(found) is type(expected)
