"""Constants written with a cast (rewriter.passes.cast_constants), as SQLAlchemy's PostgreSQL
dialects send them (``%(p)s::VARCHAR``, bound by dpproxy as ``'I%'::VARCHAR``): read as the
constants where PostgreSQL's value and meaning are the same, answered as PostgreSQL
answers the analyst's SQL on both engines; the same plan as the constants written plainly
where the answer is noisy (quantiles) or post-processed (LIMIT, OFFSET); kept, and refused
as before, where a cast changes the meaning."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pytest

from rewriter import PlanRequest, Rejected, plan
from tests.rewriter.driver_sql import Engines, catalog, engines
from tests.rewriter.tables import catalog as visits_catalog


@pytest.fixture(scope="module")
def notes(pg_dsn: str) -> Iterator[Engines]:
    with engines(pg_dsn) as found:
        yield found


WHERE = [
    "name LIKE 'A%'::varchar",
    "name LIKE 'A%'::text",
    "name ILIKE 'a'::varchar || '%'",
    "name LIKE 'A' || '%'",
    "name LIKE '%' || 'n'::varchar || '%'",
    "name LIKE ('%' || ('c'::character varying || '%'))",
    "name NOT LIKE 'A'::varchar || '%'",
    "name NOT ILIKE '%' || ' '::varchar",
    "code = ANY(ARRAY['A', 'B']) AND name LIKE 'A'::varchar || '%'",
]


@pytest.mark.parametrize("predicate", WHERE)
def test_like_patterns_are_what_postgresql_matches(predicate: str, notes: Engines) -> None:
    sql = f"SELECT COUNT(*) FROM notes WHERE {predicate}"
    on_duck, on_pg = notes.released(sql, delta=0.0)
    assert on_duck == on_pg == notes.native(sql)


KEYS = [
    # A CASE of constants with casts: a key with a public domain.
    "CASE WHEN stay < 2 THEN 'low'::varchar WHEN stay < 10 THEN 'mid'::text "
    "ELSE 'high'::varchar END",
    "CASE WHEN cost < 1 THEN 'cheap'::varchar END",
    "CASE WHEN cost < 1 THEN 1::integer ELSE 0::integer END",
    "CASE WHEN cost < 1 THEN 1::bigint WHEN cost < 5 THEN NULL::bigint ELSE 0::smallint END",
    "width_bucket(stay, 0::integer, 30::integer, 3::integer)",
    "width_bucket(cost, -100::integer, 100.0::numeric, 4::smallint)",
]


@pytest.mark.parametrize("key", KEYS)
def test_public_keys_are_postgresql_s_own(key: str, notes: Engines) -> None:
    sql = f"SELECT {key} AS k, COUNT(*) FROM notes GROUP BY 1"
    on_duck, on_pg = notes.released(sql, delta=0.0)  # δ = 0: a public domain
    assert on_duck == on_pg
    # The domain's empty cells are released too (a count of 0 without noise).
    assert {k: n for k, n in on_duck if n} == dict(notes.native(sql))


DATA_KEYS = [
    "substring(name, 1::integer, 2::integer)",
    "substring(name FROM 2::smallint)",
    "left(name, 1::integer)",
]


@pytest.mark.parametrize("key", DATA_KEYS)
def test_keys_from_the_data_are_postgresql_s_own(key: str, notes: Engines) -> None:
    sql = f"SELECT {key} AS k, COUNT(*) FROM notes GROUP BY 1"
    on_duck, on_pg = notes.released(sql)
    assert on_duck == on_pg
    assert dict(on_duck) == {k: n for k, n in notes.native(sql)}


def _same_plan(written: str, plain: str, delta: float = 0.0) -> None:
    made = plan(written, catalog("main"), PlanRequest(1.0, delta=delta))
    expected = plan(plain, catalog("main"), PlanRequest(1.0, delta=delta))
    assert (made.sql, made.post_sql) == (expected.sql, expected.post_sql)
    assert made.measurements == expected.measurements


BY_CODE = "SELECT code, COUNT(*) FROM notes GROUP BY 1 ORDER BY 1"


@pytest.mark.parametrize(
    ("written", "plain"),
    [
        (f"{BY_CODE} LIMIT 2::integer", f"{BY_CODE} LIMIT 2"),
        (f"{BY_CODE} LIMIT 2::integer OFFSET 1::integer", f"{BY_CODE} LIMIT 2 OFFSET 1"),
        (f"{BY_CODE} LIMIT (2)::smallint OFFSET 1::bigint", f"{BY_CODE} LIMIT 2 OFFSET 1"),
        (f"{BY_CODE} LIMIT ALL OFFSET 1::integer", f"{BY_CODE} OFFSET 1"),
        (f"{BY_CODE} LIMIT ALL", BY_CODE),
        (f"{BY_CODE} LIMIT NULL", BY_CODE),
        (f"{BY_CODE} LIMIT NULL::bigint OFFSET NULL", BY_CODE),
        (f"{BY_CODE} LIMIT (NULL) OFFSET NULL::integer", BY_CODE),
        (f"{BY_CODE} LIMIT -1::integer", f"{BY_CODE} LIMIT -1"),
    ],
)
def test_limit_and_offset_with_casts_are_the_plain_ones(written: str, plain: str) -> None:
    if "-1" in plain:
        for sql in (written, plain):
            with pytest.raises(Rejected, match="LIMIT must not be negative"):
                plan(sql, catalog("main"), PlanRequest(1.0))
        return
    _same_plan(written, plain)


@pytest.mark.parametrize(
    "fraction", ["0.5::float8", "0.5::double precision", "0.5::numeric", "0.25::real", "1::integer"]
)
def test_a_quantile_s_fraction_with_a_cast_is_the_fraction(fraction: str) -> None:
    number = fraction.split("::", maxsplit=1)[0]
    _same_plan(
        f"SELECT percentile_cont({fraction}) WITHIN GROUP (ORDER BY cost) FROM notes",
        f"SELECT percentile_cont({number}) WITHIN GROUP (ORDER BY cost) FROM notes",
    )


@pytest.mark.parametrize(
    ("written", "plain"),
    [
        ("date_trunc('month'::varchar, day)", "date_trunc('month', day)"),
        ("date_trunc('year'::text, day)", "date_trunc('year', day)"),
        # PostgreSQL has no round(double precision, integer): dpproxy rounds a numeric.
        ("round(cost, 1::integer)", "round(cost, 1)"),
        ("round(cost, -1::smallint)", "round(cost, -1)"),
    ],
)
def test_arguments_with_casts_are_the_arguments(written: str, plain: str) -> None:
    query = "SELECT {}, COUNT(*) FROM notes GROUP BY 1"
    _same_plan(query.format(written), query.format(plain), delta=0.4)
    inside = "SELECT SUM({}) FROM notes"
    if "round" in written:
        _same_plan(inside.format(written), inside.format(plain))


def test_columns_keep_postgresql_s_names() -> None:
    made = plan(
        "SELECT CASE WHEN stay < 2 THEN 'low'::varchar ELSE 'high'::varchar END, "
        "width_bucket(stay, 0::integer, 30::integer, 3::integer), COUNT(*) "
        "FROM notes GROUP BY 1, 2",
        catalog("main"),
        PlanRequest(1.0),
    )
    assert '"k0" AS "case"' in made.post_sql
    assert '"k1" AS "width_bucket"' in made.post_sql
    assert made.keys[0].domain == ("low", "high")


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        # varchar(1) cuts the pattern to 'A': another question.
        ("SELECT COUNT(*) FROM notes WHERE name LIKE 'A%'::varchar(1)", "precision or length"),
        ("SELECT COUNT(*) FROM notes WHERE name LIKE 'A%'::char(2)", "casting to CHAR"),
        ("SELECT COUNT(*) FROM notes WHERE name LIKE 'A' || NULL", "quoted text"),
        # PostgreSQL has no substring(text, bigint).
        (
            "SELECT substring(name, 1::bigint, 2), COUNT(*) FROM notes GROUP BY 1",
            "constant whole numbers",
        ),
        # 0.1::real is 0.10000000149011612.
        (
            "SELECT percentile_cont(0.1::real) WITHIN GROUP (ORDER BY cost) FROM notes",
            "constant fraction",
        ),
        # Which width_bucket runs (double precision or numeric) depends on its types.
        (
            "SELECT width_bucket(cost, 0.5::float8, 10, 2), COUNT(*) FROM notes GROUP BY 1",
            "constant lo, hi and n",
        ),
        ("SELECT code, COUNT(*) FROM notes GROUP BY 1 LIMIT 40000::smallint", "LIMIT takes"),
        ("SELECT code, COUNT(*) FROM notes GROUP BY 1 LIMIT 'x'::text", "LIMIT takes"),
        ("SELECT code, COUNT(*) FROM notes GROUP BY 1 LIMIT ALL OFFSET 'x'", "OFFSET takes"),
        # NULLs alone: nothing tells the CASE's type but the casts.
        (
            "SELECT CASE WHEN stay < 2 THEN NULL::varchar END AS k, COUNT(*) FROM notes GROUP BY 1",
            "has no public domain",
        ),
        # In a subquery, the CASE's type could meet a column in the enclosing query.
        (
            "SELECT k, COUNT(*) FROM (SELECT CASE WHEN stay < 2 THEN 'low'::varchar "
            "ELSE 'high'::varchar END AS k FROM notes) s GROUP BY k",
            "has no public domain",
        ),
    ],
)
def test_casts_that_change_the_meaning_are_kept(sql: str, words: str) -> None:
    with pytest.raises(Rejected, match=words):
        plan(sql, catalog("main"), PlanRequest(1.0))


def test_a_limit_in_parentheses_is_the_number() -> None:
    """LIMIT (2) and OFFSET (1), which PostgreSQL reads as the numbers, run on the released
    rows as they do on PostgreSQL."""
    made = plan(
        "SELECT department, COUNT(*) FROM visits GROUP BY department "
        "ORDER BY department LIMIT (2) OFFSET (1)",
        visits_catalog("main"),
        PlanRequest(1.0),
    )
    released = duckdb.connect()
    released.execute('CREATE TABLE released ("k0" VARCHAR, "a0" BIGINT)')
    released.execute("INSERT INTO released VALUES ('A', 1), ('B', 2), ('C', 3), ('D', 4)")
    assert released.execute(made.post_sql).fetchall() == [("B", 2), ("C", 3)]
