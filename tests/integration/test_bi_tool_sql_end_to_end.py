"""SQL that BI tools send (Metabase, Power BI, Superset), through a real `dpproxy serve`
and psycopg, on DuckDB and PostgreSQL, compared with what PostgreSQL itself describes and
computes: a qualified star around a DP query, round() of a double and of a numeric,
round(x, 2) of a share, trunc() around released values, casts that cannot fail inside an
aggregate, arithmetic on a weekday key, and refusals in the analyst's words."""

from __future__ import annotations

from decimal import Decimal

import psycopg
import pytest

from tests.integration.server import Connection

pytestmark = pytest.mark.integration

PATIENTS = 1_000
DIRECTORY_PREFIX = "bi-sql-"
INNER = "SELECT department, COUNT(*) AS n FROM visits GROUP BY department"
#: A stand-in of the inner query's released rows on PostgreSQL (department text, n bigint).
RELEASED = "SELECT * FROM (VALUES ('A'::text, 2::bigint), ('B', 3)) AS v(department, n)"

#: The OIDs of the types PostgreSQL describes.
TEXT, INT8, FLOAT8, NUMERIC = 25, 20, 701, 1700


def _described(conn: Connection, sql: str) -> tuple[list[str], list[int], list[tuple[object, ...]]]:
    cursor = conn.execute(sql)
    rows = cursor.fetchall()
    description = cursor.description or []
    return [d.name for d in description], [d.type_code for d in description], rows


@pytest.mark.parametrize(
    "wrapper",
    [
        "SELECT s.* FROM ({inner}) s",
        'SELECT "source".* FROM ({inner}) "source" LIMIT 1048575',
        "WITH t AS ({inner}) SELECT t.* FROM t",
        "SELECT s.*, n AS again FROM ({inner}) s",
    ],
)
def test_a_qualified_star_around_a_dp_query(
    proxy: Connection, postgres: Connection, wrapper: str
) -> None:
    """Was: column "s.*" does not exist (42703)."""
    names, types, rows = _described(proxy, wrapper.format(inner=INNER))
    their_names, their_types, _ = _described(postgres, wrapper.format(inner=RELEASED))
    assert (names, types) == (their_names, their_types)
    assert types[:2] == [TEXT, INT8]
    assert len(rows) == 8  # the demo's public list of departments


def test_round_follows_its_argument_s_type(proxy: Connection, postgres: Connection) -> None:
    """round(2.5::float8) is 2 (rint: halves to even), round(2.5) 3 (a numeric)."""
    items = "round({z} + 2.5::float8) AS a, round({z} + 2.5) AS b, round({z} - 3.5::float8) AS c"
    names, types, rows = _described(
        proxy, "SELECT " + items.format(z="COUNT(*) * 0") + " FROM visits"
    )
    their_names, their_types, theirs = _described(postgres, "SELECT " + items.format(z="0"))
    assert (
        (names, types) == (their_names, their_types) == (["a", "b", "c"], [FLOAT8, NUMERIC, FLOAT8])
    )
    assert rows == theirs == [(2.0, Decimal(3), -4.0)]


def test_a_share_rounded_to_two_places_is_a_numeric_of_two_decimals(proxy: Connection) -> None:
    """As PostgreSQL's round(numeric, 2): 20.70, not the 20.7 of a double."""
    _, types, rows = _described(
        proxy,
        "SELECT department, ROUND(100.0 * COUNT(*) / SUM(COUNT(*)) OVER (), 2) AS pct "
        "FROM visits GROUP BY department",
    )
    assert types == [TEXT, NUMERIC]
    shares = [r[1] for r in rows]
    assert all(isinstance(s, Decimal) and s.as_tuple().exponent == -2 for s in shares), shares


def test_trunc_and_its_kin_around_released_values(proxy: Connection, postgres: Connection) -> None:
    """Was: trunc(n*1.5) "cannot be computed over the noisy answers"."""
    items = (
        "trunc(n * 1.5) AS t, round(n * 1.5, 1) AS r, sign(n) AS s, ceil(n * 1.5) AS c, "
        "floor(n) AS f, abs(n) AS a, mod(n, 7) AS m, div(n, 7) AS d, greatest(n, 2) AS g"
    )
    sql = f"SELECT {items} FROM ({{inner}}) s ORDER BY 1"
    names, types, rows = _described(proxy, sql.format(inner=INNER))
    their_names, their_types, _ = _described(postgres, sql.format(inner=RELEASED))
    assert (names, types) == (their_names, their_types)
    for t, r, _s, c, f, a, m, d, g in rows:
        n = a
        assert isinstance(n, int)
        assert t == Decimal(n * 3 // 2) and r == Decimal(n * 15).scaleb(-1)
        assert c == Decimal(-(-n * 3 // 2)) and f == float(n) and m == n % 7 and d == n // 7
        assert g == max(n, 2)


def test_casts_that_cannot_fail_are_answered(proxy: Connection) -> None:
    """Were refused as "could fail on some values" (length_of_stay is within [0, 30])."""
    _, types, rows = _described(
        proxy,
        "SELECT AVG(CAST(length_of_stay AS numeric)), AVG(length_of_stay::numeric(18, 2)), "
        "AVG(length_of_stay::float8), SUM(length_of_stay::bigint) FROM visits",
    )
    assert types == [FLOAT8, FLOAT8, FLOAT8, INT8]
    assert all(0 <= v <= 30 for v in rows[0][:3])  # type: ignore[operator]


def test_a_cast_that_can_fail_is_refused_before_the_charge(proxy: Connection) -> None:
    with pytest.raises(psycopg.errors.FeatureNotSupported) as refused:
        proxy.execute("SELECT AVG(length_of_stay::numeric(3, 2)) FROM visits")
    assert "numeric(3, 2) holds less than ±10" in str(refused.value.diag.message_primary)


def test_a_weekday_numbered_from_one(proxy: Connection) -> None:
    """GROUP BY CAST(extract(dow …) AS integer) + 1 (was: "CAST(EXTRACT(DOW FROM
    visit_date) AS INT) in GROUP BY could fail on some values")."""
    proxy.execute("SET dpproxy.epsilon = 5")  # partition selection of small groups
    _, types, rows = _described(
        proxy,
        "SELECT CAST(extract(dow FROM visit_date) AS integer) + 1 AS dow, COUNT(*) "
        "FROM visits GROUP BY 1 ORDER BY 1",
    )
    assert types == [INT8, INT8]
    assert {r[0] for r in rows} <= set(range(1, 8)) and rows


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT department, COUNT(*) FROM visits GROUP BY GROUPING SETS ((department), ())",
            "GROUPING SETS is not supported in GROUP BY",
        ),
        (
            "SELECT string_agg(department, ',') FROM visits",
            "the aggregate string_agg() is not supported yet",
        ),
        (
            "SELECT AVG(CURRENT_DATE - visit_date) FROM visits",
            "cannot bound CURRENT_DATE - visit_date inside an aggregate",
        ),
    ],
)
def test_refusals_quote_what_was_written(proxy: Connection, sql: str, message: str) -> None:
    with pytest.raises(psycopg.errors.FeatureNotSupported) as refused:
        proxy.execute(sql)
    assert refused.value.diag.message_primary == message
