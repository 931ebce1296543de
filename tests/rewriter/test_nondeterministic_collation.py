"""LIKE and ILIKE on a column of a nondeterministic collation never fail (review finding).

PostgreSQL 15 refuses LIKE and ILIKE on a text under a nondeterministic collation
(``nondeterministic collations are not supported for LIKE``), and ILIKE on a text whose
collation is indeterminate (``could not determine which collation to use for ILIKE``),
only when a row reaches the operator: ``CASE WHEN stay = 7 THEN code LIKE 'f%' END``
ran when no row had stay 7 and failed when one had, after the charge. The SQL for
PostgreSQL reads the text that LIKE and ILIKE match under the database's default collation
(``rewriter.passes.collations``). Each test runs the bounded SQL on tables whose text
columns have case-insensitive ICU collations, with and without rows reaching the operator,
and compares it with the same tables under the default collation, and the released
answer with the analyst's own query on those.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from decimal import Decimal

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
from rewriter.errors import Rejected
from tests.rewriter.noise import ZeroNoise

pytestmark = pytest.mark.postgres

CODES = {
    "patient_id": ColumnType.INTEGER,
    "code": ColumnType.TEXT,
    "other": ColumnType.TEXT,
    "stay": ColumnType.INTEGER,
}
NAMES = {"stay": ColumnType.INTEGER, "name": ColumnType.TEXT}
POLICIES = {
    "codes": TablePolicy(
        privacy_unit="patient_id",
        max_rows_per_unit=1,
        max_groups_per_unit=1,
        columns={"stay": ColumnPolicy(lower=0, upper=10)},
    ),
    "names": TablePolicy(public=True),
}
#: Under the case-insensitive collations "ci" (and "ci2", of another strength) for "code",
#: "other" and "name"; or under the database's default collation, as the reference.
COLLATIONS = [
    "CREATE COLLATION {schema}.ci (provider = icu, locale = 'und-u-ks-level2', "
    "deterministic = false)",
    "CREATE COLLATION {schema}.ci2 (provider = icu, locale = 'und-u-ks-level1', "
    "deterministic = false)",
]
#: One spelling per text, so that comparing texts (=, IN, JOIN) finds the same rows under
#: either collation; LIKE differs from ILIKE on them.
SPELLINGS = ("flu", "FEVER", "fatigue", "Cold")
PERSONS = range(1, 13)
#: Which persons' rows have stay = 7, the condition in front of each LIKE below: none
#: (LIKE is never evaluated), or two thirds of them.
REACHED = {"none": (), "some": tuple(range(1, 9))}

#: The analyst's query, and the same answer computed without the rewriter where the
#: released answer differs from the query's own (an empty SUM is 0; every cell of a public
#: domain is released, with a count of 0 when empty).
QUERIES: list[tuple[str, str | None]] = [
    ("SELECT COUNT(*) FROM codes WHERE CASE WHEN stay = 7 THEN code LIKE 'f%' END", None),
    ("SELECT COUNT(*) FILTER (WHERE stay = 7 AND code ILIKE 'F%') FROM codes", None),
    (
        "SELECT SUM(CASE WHEN stay = 7 AND code LIKE 'f%' THEN stay END) FROM codes",
        "SELECT COALESCE(SUM(CASE WHEN stay = 7 AND code LIKE 'f%' THEN stay END), 0) FROM codes",
    ),
    ("SELECT COUNT(*) FROM codes WHERE stay = 7 AND lower(code) || '!' NOT ILIKE 'c%'", None),
    ("SELECT AVG(stay) FILTER (WHERE stay = 7 OR upper(code) NOT LIKE 'F%') FROM codes", None),
    (
        "SELECT COUNT(*) FROM codes WHERE CASE WHEN stay = 7 THEN "
        "CASE WHEN stay > 0 THEN code ELSE other END ILIKE 'f%' END",
        None,
    ),
    (
        "SELECT CASE WHEN stay = 7 AND code LIKE 'f%' THEN 'yes' ELSE 'no' END AS k, COUNT(*) "
        "FROM codes GROUP BY 1",
        "SELECT d.k, COUNT(c.k) FROM (VALUES ('yes'), ('no')) AS d (k) LEFT JOIN "
        "(SELECT CASE WHEN stay = 7 AND code LIKE 'f%' THEN 'yes' ELSE 'no' END AS k "
        "FROM codes) AS c ON c.k = d.k GROUP BY d.k",
    ),
    (
        "SELECT stay = 7 AND code ILIKE 'f%' AS k, COUNT(*) FROM codes GROUP BY 1",
        "SELECT d.k, COUNT(c.p) FROM (VALUES (true), (false), (NULL)) AS d (k) LEFT JOIN "
        "(SELECT stay = 7 AND code ILIKE 'f%' AS k, patient_id AS p FROM codes) AS c "
        "ON c.k IS NOT DISTINCT FROM d.k GROUP BY d.k",
    ),
    (
        "SELECT CASE WHEN stay = 7 AND code LIKE 'f%' THEN 1 ELSE 2 END AS k, COUNT(*) "
        "FROM codes GROUP BY 1",
        "SELECT d.k, COUNT(c.k) FROM (VALUES (1), (2)) AS d (k) LEFT JOIN "
        "(SELECT CASE WHEN stay = 7 AND code LIKE 'f%' THEN 1 ELSE 2 END AS k "
        "FROM codes) AS c ON c.k = d.k GROUP BY d.k",
    ),
    ("SELECT code, COUNT(*) FROM codes WHERE stay = 7 AND code LIKE 'f%' GROUP BY code", None),
    (  # a key from the data (grouped byte by byte, COLLATE "C") with a LIKE inside
        "SELECT CASE WHEN stay = 7 AND code LIKE 'f%' THEN code ELSE 'other' END AS k, "
        "COUNT(*) FROM codes GROUP BY 1",
        None,
    ),
    (
        "SELECT COUNT(*) FROM codes "
        "WHERE stay = 7 AND code IN (SELECT name FROM names WHERE name LIKE 'f%')",
        None,
    ),
    (
        "SELECT COUNT(*) FROM codes WHERE patient_id IN "
        "(SELECT patient_id FROM codes WHERE stay = 7 AND code ILIKE 'f%')",
        None,
    ),
    (
        "SELECT COUNT(*) FROM codes JOIN names ON codes.stay = names.stay "
        "AND names.name LIKE 'f%' AND codes.code ILIKE 'F%'",
        None,
    ),
    (
        "WITH c AS (SELECT * FROM codes WHERE stay = 7 AND code LIKE 'f%') SELECT COUNT(*) FROM c",
        None,
    ),
    (
        "SELECT COUNT(*) FROM (SELECT patient_id, code FROM codes WHERE stay = 7) AS c "
        "WHERE c.code LIKE 'f%'",
        None,
    ),
    # strpos and position, which PostgreSQL refuses alike (Tableau's CONTAINS).
    ("SELECT COUNT(*) FROM codes WHERE stay = 7 AND strpos(lower(code), 'f') > 0", None),
    ("SELECT COUNT(*) FROM codes WHERE stay = 7 AND position(other IN code) = 0", None),
    ("SELECT COUNT(*) FILTER (WHERE stay = 7 AND position('F' IN code) = 1) FROM codes", None),
]


def statements(place: str, declared: dict[str, str]) -> list[str]:
    """The tables, with each text column ``declared`` as given (a type and collation)."""
    reached = REACHED[place]
    rows = ", ".join(
        f"({p}, '{SPELLINGS[p % len(SPELLINGS)]}', '{SPELLINGS[(p + 1) % len(SPELLINGS)]}', "
        f"{7 if p in reached else 2})"
        for p in PERSONS
    )
    # One name of each stay matches LIKE 'f%' (flu, fatigue): one row per person in joins.
    names = ", ".join(f"({7 if i < 2 else 2}, '{s}')" for i, s in enumerate(SPELLINGS))
    return [
        f"CREATE TABLE {{schema}}.codes (patient_id BIGINT, code {declared['code']}, "
        f"other {declared['other']}, stay INTEGER)",
        f"INSERT INTO {{schema}}.codes VALUES {rows}",
        f"CREATE TABLE {{schema}}.names (stay INTEGER, name {declared['name']})",
        f"INSERT INTO {{schema}}.names VALUES {names}",
    ]


CASE_INSENSITIVE = {
    "code": "TEXT COLLATE {schema}.ci",
    "other": "TEXT COLLATE {schema}.ci2",
    "name": "TEXT COLLATE {schema}.ci",
}
DEFAULT = {"code": "TEXT", "other": "TEXT", "name": "TEXT"}


def load(dsn: str, schema: str, setup: Sequence[str]) -> None:
    """A fresh ``schema`` holding what ``setup`` creates."""
    quoted = f'"{schema}"'
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {quoted} CASCADE")
        conn.execute(f"CREATE SCHEMA {quoted}")
        for statement in setup:
            try:
                conn.execute(statement.format(schema=quoted).encode())
            except psycopg.errors.FeatureNotSupported:
                pytest.skip("this PostgreSQL server has no ICU collations")


def fetch(dsn: str, sql: str, search_path: str | None = None) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn) as conn:
        if search_path is not None:
            conn.execute(f'SET search_path = "{search_path}"'.encode())
        return [tuple(r) for r in conn.execute(sql.encode()).fetchall()]


@pytest.fixture
def reference_schema(pg_dsn: str, pg_schema: str) -> Iterator[str]:
    """A second schema, for the same tables under the default collation."""
    name = f"{pg_schema}_default"
    try:
        yield name
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def catalog(schema: str) -> Catalog:
    # names.stay is taken as unique so that a join may test LIKE in its ON (a server would
    # not take it: two names share each stay, of which the join's LIKE keeps one).
    unique = {"names": ["stay"]}
    return build_catalog({"codes": CODES, "names": NAMES}, POLICIES, schema=schema, unique=unique)


def planned(sql: str, schema: str) -> Plan:
    return plan(sql, catalog(schema), PlanRequest(10.0, delta=0.4, dialect="postgres"))


def released(made: Plan, exact: list[tuple[object, ...]]) -> set[tuple[str | None, ...]]:
    """The rows the analyst receives, released without noise."""
    rows = PostProcessor().run(made.release(exact, ZeroNoise()), made.post_sql).rows
    return {tuple(_text(v) for v in row) for row in rows}


def _text(value: object) -> str | None:
    """A value as comparable text: numbers as floats, booleans as PostgreSQL writes them."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, (int, float, Decimal)):
        return repr(float(value))
    try:
        return repr(float(str(value)))
    except ValueError:
        return str(value)


@pytest.mark.parametrize(("sql", "same"), QUERIES)
def test_like_on_a_nondeterministic_collation_never_fails(
    sql: str, same: str | None, pg_dsn: str, pg_schema: str, reference_schema: str
) -> None:
    """Whether or not some row reaches the LIKE, the bounded query runs, and finds what it
    finds under the default collation; the released answer is the analyst's query's."""
    made = planned(sql, pg_schema)
    reference = planned(sql, reference_schema)
    for place in REACHED:
        load(pg_dsn, pg_schema, [*COLLATIONS, *statements(place, CASE_INSENSITIVE)])
        load(pg_dsn, reference_schema, statements(place, DEFAULT))
        exact = fetch(pg_dsn, made.sql)  # failed on the old code when some row reached LIKE
        assert sorted(exact, key=repr) == sorted(fetch(pg_dsn, reference.sql), key=repr), place
        computed = fetch(pg_dsn, same or sql, reference_schema)
        direct = {tuple(_text(v) for v in row) for row in computed}
        assert released(made, exact) == direct, place


@pytest.mark.parametrize("operator", ["LIKE", "ILIKE", "NOT LIKE", "NOT ILIKE"])
def test_like_counts_what_the_default_collation_matches(
    operator: str, pg_dsn: str, pg_schema: str
) -> None:
    """The counts, against an independent count in Python: LIKE compares characters exactly
    (case-sensitive on a case-insensitive column), ILIKE folds case."""
    sql = f"SELECT COUNT(*) FROM codes WHERE CASE WHEN stay = 7 THEN code {operator} 'f%' END"
    made = planned(sql, pg_schema)
    for place, reached in REACHED.items():
        load(pg_dsn, pg_schema, [*COLLATIONS, *statements(place, CASE_INSENSITIVE)])
        codes = [SPELLINGS[p % len(SPELLINGS)] for p in reached]
        folded = [c.lower() if "ILIKE" in operator else c for c in codes]
        matches = sum(c.startswith("f") for c in folded)
        expected = len(codes) - matches if operator.startswith("NOT") else matches
        assert released(made, fetch(pg_dsn, made.sql)) == {(repr(float(expected)),)}, place


@pytest.mark.parametrize("dialect", ["postgres", "duckdb"])
@pytest.mark.parametrize("operator", ["LIKE", "ILIKE", "NOT LIKE"])
def test_like_on_a_value_not_read_as_text_is_refused_before_the_charge(
    dialect: str, operator: str
) -> None:
    """bytea (a type dpproxy reads as 'other') under COLLATE "default" fails on every row
    in PostgreSQL, after the charge: LIKE on it is refused when the query is planned."""
    columns = {"pid": ColumnType.INTEGER, "blob": ColumnType.OTHER}
    policies = {"files": TablePolicy(privacy_unit="pid", max_rows_per_unit=1)}
    other = build_catalog({"files": columns}, policies, schema="main")
    with pytest.raises(Rejected, match="LIKE needs a text value"):
        plan(
            f"SELECT COUNT(*) FROM files WHERE blob {operator} 'a%'",
            other,
            PlanRequest(1.0, dialect),
        )


def test_similar_to_is_refused_in_the_analysts_words() -> None:
    """Regular expressions fail under a nondeterministic collation too; they are refused
    whatever the collation, named as written (it said SIMILARTO)."""
    with pytest.raises(Rejected, match="^SIMILAR TO is not allowed in WHERE$"):
        plan(
            "SELECT COUNT(*) FROM codes WHERE code SIMILAR TO 'f%'",
            catalog("main"),
            PlanRequest(1.0, "postgres"),
        )
