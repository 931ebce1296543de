"""GROUP BY keys found in the data are released in one spelling per group (review finding).

Both engines put -0.0 with 0.0 and every NaN together in one group, text equal under a
case-insensitive collation together, and, on PostgreSQL, a ``bpchar`` equal but for
trailing spaces together; they return whichever value they met first. Released as such,
the spelling ('-0.0', DuckDB's '-nan', 'FLU', 'flu  ') told whose row came first:
PostgreSQL released '-0.0' every time one person had it among 299 with 0.0. Each test
runs the bounded SQL on DuckDB and PostgreSQL, releases without noise and post-processes
as the proxy does: where the spellings sit in the data must not change the answer.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import psycopg
import pytest

from proxy.postprocess import PostProcessor
from rewriter import (
    Catalog,
    ColumnPolicy,
    ColumnType,
    Plan,
    PlanRequest,
    TablePolicy,
    build_catalog,
    plan,
)
from rewriter.plan import Release
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.scratch import fresh_duckdb
from tests.rewriter.tables import Row, catalog, load_postgres, scratch_with

PERSONS = (1, 2, 3, 5)  # all in tables.PATIENTS, for the join; above the threshold (<= 3)
#: Which persons hold the odd spelling: the answer must be the same for each.
PLACES = {"none": (), "first": (1,), "last": (5,), "all": PERSONS}


def request(dialect: str) -> PlanRequest:
    return PlanRequest(10.0, delta=0.4, dialect=dialect)  # type: ignore[arg-type]


@dataclass
class Engine:
    dialect: str
    schema: str
    dsn: str | None = None

    def fetch(self, sql: str, setup: Sequence[str] = ()) -> list[tuple[object, ...]]:
        """Run ``setup`` (statements with ``{schema}``), then ``sql``, on fresh tables."""
        if self.dsn is None:
            conn = fresh_duckdb()  # a database of its own (tests.rewriter.scratch)
            for statement in setup:
                conn.execute(statement.format(schema="main"))
            return conn.execute(sql).fetchall()
        schema = f'"{self.schema}"'
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            conn.execute(f"CREATE SCHEMA {schema}")
            for statement in setup:
                conn.execute(statement.format(schema=schema).encode())
            return [tuple(r) for r in conn.execute(sql.encode()).fetchall()]

    def visits(self, rows: list[Row], sql: str) -> list[tuple[object, ...]]:
        """``sql`` over tests/rewriter/tables.py's tables with ``rows`` of visits."""
        if self.dsn is None:
            return scratch_with(rows).execute(sql).fetchall()
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
            conn.execute(f'CREATE SCHEMA "{self.schema}"')
        load_postgres(self.dsn, self.schema, rows)
        with psycopg.connect(self.dsn) as conn:
            return [tuple(r) for r in conn.execute(sql.encode()).fetchall()]


@pytest.fixture(params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    if request.param == "duckdb":
        yield Engine("duckdb", "main")
        return
    yield Engine(
        "postgres", request.getfixturevalue("pg_schema"), request.getfixturevalue("pg_dsn")
    )


def answer(made: Plan, exact: list[tuple[object, ...]]) -> tuple[tuple[str | None, ...], ...]:
    """The rows the analyst receives (PostgreSQL's text format), released without noise."""
    released: Release = made.release(exact, ZeroNoise())
    return post_processor().run(released, made.post_sql).rows


@functools.cache
def post_processor() -> PostProcessor:
    """One post-processor for the module, as the proxy keeps one (each run has its own
    cursor and table): making one opens a DuckDB connection."""
    return PostProcessor()


# -- floating-point keys: -0.0 and 0.0, -NaN and NaN ----------------------------------------

FLOAT_KEYS = [
    "SELECT CAST(cost AS VARCHAR) AS s, COUNT(*) FROM visits GROUP BY cost",
    "SELECT CAST(coalesce(cost, 1.5) AS VARCHAR), COUNT(*) FROM visits "
    "GROUP BY coalesce(cost, 1.5)",
    "SELECT CAST(greatest(cost, -1.0) AS VARCHAR), COUNT(*) FROM visits "
    "GROUP BY greatest(cost, -1.0)",
    "SELECT CAST(CASE WHEN stay > 0 THEN cost ELSE 1.0 END AS VARCHAR), COUNT(*) FROM visits "
    "GROUP BY CASE WHEN stay > 0 THEN cost ELSE 1.0 END",
    "SELECT CAST(v.cost AS VARCHAR), COUNT(*) FROM (SELECT patient_id, cost FROM visits) AS v "
    "GROUP BY v.cost",
    "SELECT CAST(v.cost AS VARCHAR), COUNT(*) FROM visits AS v JOIN patients AS p "
    "ON v.patient_id = p.patient_id GROUP BY v.cost",
    "SELECT COUNT(*) FROM visits GROUP BY cost HAVING CAST(cost AS VARCHAR) IN ('-0.0', '-nan')",
    "SELECT 1 / cost, COUNT(*) FROM visits GROUP BY cost",  # 1 / -0.0: -Infinity on DuckDB
]


def costs(value: float, odd: float, place: str) -> list[Row]:
    return [(p, p, "A", odd if p in PLACES[place] else value, 2) for p in PERSONS]


def signed(value: object) -> bool:
    """-0.0 or a NaN with its sign bit set."""
    return (
        isinstance(value, float)
        and (value == 0 or math.isnan(value))
        and (math.copysign(1.0, value) < 0)
    )


@pytest.mark.parametrize("sql", FLOAT_KEYS)
@pytest.mark.parametrize(("value", "odd"), [(0.0, -0.0), (math.nan, -math.nan)], ids=["0", "nan"])
def test_the_sign_of_a_zero_or_nan_is_not_released(
    sql: str, value: float, odd: float, engine: Engine
) -> None:
    made = plan(sql, catalog(engine.schema), request(engine.dialect))
    assert made.selection is not None
    answers = {}
    for place in PLACES:
        exact = engine.visits(costs(value, odd, place), made.sql)
        # In the database already: one spelling per group (the release maps them too).
        assert not any(signed(row[0]) for row in exact)
        answers[place] = answer(made, exact)
    if "HAVING" not in sql:
        assert answers["none"], "the group must be released"
    assert all(found == answers["none"] for found in answers.values()), answers


@pytest.mark.parametrize("dialect", ["duckdb", "postgres"])
def test_the_release_maps_negative_zero_and_nan_whatever_the_database_returns(
    dialect: str,
) -> None:
    """The second line of defence: rows with -0.0 and -NaN, as a database could return
    them, are released as 0.0 and NaN, and their post-processed text is PostgreSQL's text
    of a double precision 0 and NaN: '0' and 'NaN' (rewriter.passes.post_text)."""
    made = plan(FLOAT_KEYS[0], catalog("main"), request(dialect))
    for odd in (-0.0, -math.nan):
        released = made.release([(odd, 4, 4)], ZeroNoise())
        (key, _) = released.rows[0]
        assert not signed(key)
        text = post_processor().run(released, made.post_sql).rows[0][0]
        assert text in ("0", "NaN")


def test_a_key_with_a_public_domain_is_released_as_canonical_beside_one_from_the_data(
    engine: Engine,
) -> None:
    """With a key from the data, a key with a domain is released from the data too (the
    groups are selected as a whole): -0.0 passes ``score IN (0.0, 1.0)``."""
    columns = {"patient_id": ColumnType.INTEGER, "code": ColumnType.TEXT, "score": ColumnType.FLOAT}
    policy = TablePolicy(
        privacy_unit="patient_id",
        max_rows_per_unit=1,
        max_groups_per_unit=1,
        columns={"score": ColumnPolicy(domain=[0.0, 1.0])},
    )
    made = plan(
        "SELECT CAST(score AS VARCHAR), code, COUNT(*) FROM scores GROUP BY score, code",
        build_catalog({"scores": columns}, {"scores": policy}, schema=engine.schema),
        request(engine.dialect),
    )
    assert made.keys[0].domain is not None and made.selection is not None
    answers = {}
    for place, odd in PLACES.items():
        rows = ", ".join(f"({p}, '{'-0' if p in odd else '0'}')" for p in PERSONS)
        setup = [
            "CREATE TABLE {schema}.scores (patient_id BIGINT, code TEXT, score DOUBLE PRECISION)",
            # From text: a literal -0.0 is a DECIMAL (DuckDB) or a NUMERIC, without a sign.
            "INSERT INTO {schema}.scores SELECT p, 'x', CAST(s AS DOUBLE PRECISION) "
            f"FROM (VALUES {rows}) AS v (p, s)",
        ]
        answers[place] = answer(made, engine.fetch(made.sql, setup))
    assert all(found == answers["none"] for found in answers.values()), answers
    assert answers["none"] == (("0", "x", "4"),)


# -- text keys: collations that compare inexactly, blank-padded bpchar --------------------

CODE = {"patient_id": ColumnType.INTEGER, "code": ColumnType.TEXT, "stay": ColumnType.INTEGER}
CODE_POLICY = TablePolicy(
    privacy_unit="patient_id",
    max_rows_per_unit=1,
    max_groups_per_unit=1,
    columns={"stay": ColumnPolicy(lower=0, upper=10)},
)
TEXT_KEYS = [
    "SELECT code, COUNT(*) FROM codes GROUP BY code",
    "SELECT substring(code, 1, 2) AS c, COUNT(*) FROM codes GROUP BY 1",
    "SELECT coalesce(code, 'none') AS c, COUNT(*) FROM codes GROUP BY 1",
    "SELECT CASE WHEN stay > 0 THEN code ELSE 'other' END AS c, COUNT(*) FROM codes GROUP BY 1",
    "SELECT code || '!' AS c, COUNT(*) FROM codes GROUP BY 1",
]


def code_catalog(schema: str) -> Catalog:
    return build_catalog({"codes": CODE}, {"codes": CODE_POLICY}, schema=schema)


def codes(declared: str, rows: Sequence[tuple[int, str]]) -> list[str]:
    """Statements creating the table ``codes`` with these (person, code) rows, in order."""
    values = ", ".join(f"({p}, '{code}', 2)" for p, code in rows)
    return [
        f"CREATE TABLE {{schema}}.codes (patient_id BIGINT, code {declared}, stay INTEGER)",
        f"INSERT INTO {{schema}}.codes VALUES {values}",
    ]


def spelt(value: str, odd: str, place: str) -> list[tuple[int, str]]:
    """The persons' codes, the odd spelling's first."""
    rows = sorted(PERSONS, key=lambda p: p not in PLACES[place])
    return [(p, odd if p in PLACES[place] else value) for p in rows]


def case_insensitive(engine: Engine) -> tuple[str, list[str]]:
    """The declared type of a case-insensitive text column, and what it needs first."""
    if engine.dsn is None:
        return "VARCHAR COLLATE NOCASE", []
    return 'TEXT COLLATE {schema}."ci"', [
        "CREATE COLLATION {schema}.\"ci\" (provider = icu, locale = 'und-u-ks-level2', "
        "deterministic = false)"
    ]


@pytest.mark.parametrize("sql", TEXT_KEYS)
def test_a_case_insensitive_collation_does_not_merge_spellings(sql: str, engine: Engine) -> None:
    """One person's 'FLU' among 'flu': grouped byte by byte, it is a group of its own (of
    one person: not released), and the others' group is released as 'flu', whoever's row
    the database meets first. Merged, the group counted the person and took its spelling
    when the database met it first."""
    declared, setup = case_insensitive(engine)
    made = plan(sql, code_catalog(engine.schema), request(engine.dialect))
    common = [(p, "flu") for p in PERSONS]
    target = (9, "FLU")  # one more person, met first, or last
    answers = {}
    for place, rows in (
        ("absent", common),
        ("first", [target, *common]),
        ("last", [*common, target]),
    ):
        statements = [*setup, *codes(declared, rows)]
        try:
            exact = engine.fetch(made.sql, statements)
        except psycopg.errors.FeatureNotSupported:
            pytest.skip("this PostgreSQL server has no ICU collations")
        answers[place] = answer(made, exact)
    assert all(found == answers["absent"] for found in answers.values()), answers
    assert [row[1] for row in answers["absent"]] == ["4"]


@pytest.mark.postgres
@pytest.mark.parametrize("declared", ["bpchar", "char(5)"])
@pytest.mark.parametrize("sql", TEXT_KEYS)
def test_trailing_spaces_of_a_bpchar_are_not_released(
    sql: str, declared: str, pg_dsn: str, pg_schema: str
) -> None:
    """PostgreSQL's bpchar compares 'flu' and 'flu  ' equal; unconstrained, it keeps the
    spaces each row was written with and returned those of the first row it met. The key
    is released as text, without trailing spaces (PostgreSQL's own conversion)."""
    made = plan(sql, code_catalog(pg_schema), request("postgres"))
    engine = Engine("postgres", pg_schema, pg_dsn)
    answers = {
        place: answer(made, engine.fetch(made.sql, codes(declared, spelt("flu", "flu  ", place))))
        for place in PLACES
    }
    assert all(found == answers["none"] for found in answers.values()), answers
    assert [row[1] for row in answers["none"]] == ["4"]
    assert not any(str(row[0]).endswith(" ") for row in answers["none"])


@pytest.mark.postgres
def test_decimals_of_different_scales_are_one_released_value(pg_dsn: str, pg_schema: str) -> None:
    """PostgreSQL's numeric 1.0 and 1.00 are equal and one group, and print differently:
    a decimal key is released as a DOUBLE, so the scale of the first row met is lost."""
    columns = {"patient_id": ColumnType.INTEGER, "code": ColumnType.DECIMAL}
    policy = TablePolicy(privacy_unit="patient_id", max_rows_per_unit=1)
    made = plan(
        "SELECT CAST(code AS VARCHAR), code * 1, COUNT(*) FROM codes GROUP BY code",
        build_catalog({"codes": columns}, {"codes": policy}, schema=pg_schema),
        request("postgres"),
    )
    engine = Engine("postgres", pg_schema, pg_dsn)
    answers = {}
    for place, odd in PLACES.items():
        rows = ", ".join(f"({p}, {'1.00' if p in odd else '1.0'})" for p in PERSONS)
        setup = [
            "CREATE TABLE {schema}.codes (patient_id BIGINT, code NUMERIC)",
            f"INSERT INTO {{schema}}.codes VALUES {rows}",
        ]
        answers[place] = answer(made, engine.fetch(made.sql, setup))
    assert all(found == answers["none"] for found in answers.values()), answers
    assert answers["none"] == (("1", "1", "4"),)  # released as a double


# -- the order of released groups ----------------------------------------------------------


def test_the_order_of_released_groups_does_not_depend_on_unreleased_ones() -> None:
    """With NaN compared as a number, sorting the released groups was not a total order:
    their order followed the database's rows, which include groups not released."""
    made = plan(FLOAT_KEYS[0], catalog("main"), request("duckdb"))
    released = [(math.nan, 4, 4), (2.5, 4, 4), (0.5, 4, 4), (None, 4, 4), (7.25, 4, 4)]
    unreleased = (1.5, 1, 1)  # one person: below the threshold
    orders = set()
    for rows in (released[i:] + released[:i] for i in range(len(released))):
        for position in range(len(rows) + 1):
            exact = [*rows[:position], unreleased, *rows[position:]]
            keys = tuple(repr(row[0]) for row in made.release(exact, ZeroNoise()).rows)
            orders.add(keys)
    assert orders == {("0.5", "2.5", "7.25", "nan", "None")}


def test_released_double_keys_come_in_numeric_order() -> None:
    """A whole double is released as an int: ints and floats are ordered by value
    together (all fractions came before all whole numbers: -inf, 0.5, 1.5, inf, 1, 2)."""
    made = plan(FLOAT_KEYS[0], catalog("main"), request("duckdb"))
    values = [2.0, 1.5, math.inf, 0.5, -math.inf, 1.0, math.nan, None]
    exact = [(value, 4, 4) for value in values]
    keys = [row[0] for row in made.release(exact, ZeroNoise()).rows]
    assert [repr(k) for k in keys] == ["-inf", "0.5", "1.0", "1.5", "2.0", "inf", "nan", "None"]
