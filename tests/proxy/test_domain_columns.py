"""Groups from a public domain: the database keeps the rows where ``key IN (<domain>)``
holds and the release finds each returned value in the domain. Where the two disagreed,
the query failed after its charge only when such a row existed (review): a boolean key
read as ``department = ('A' IN (TRUE, FALSE))`` failed on DuckDB for a department 'C'; a
NOCASE or char(n) column returned 'a' or 'C  ' for a domain of 'A' and 'C'; an integer
column with a domain of texts returned 1 for '1'."""

from __future__ import annotations

from pathlib import Path

import duckdb
import psycopg
import pytest

from proxy.domain_columns import check_domain_columns
from rewriter import ColumnPolicy, ColumnType, PlanRequest, PolicyError, TablePolicy, build_catalog
from rewriter import plan as make_plan
from tests.proxy.test_unit_columns import _duckdb_schema, _postgres_schema
from tests.rewriter.coupling import in_key_order
from tests.rewriter.noise import ZeroNoise

VISITS = {
    "patient_id": ColumnType.INTEGER,
    "department": ColumnType.TEXT,
    "stay": ColumnType.INTEGER,
}
ROWS = [(1, "A", 5), (2, "B", 0), (3, "C", -1), (3, "C", None)]


def _catalog(schema: str, **domains: list[str | int | float | bool]):  # type: ignore[no-untyped-def]
    policy = TablePolicy(
        privacy_unit="patient_id",
        max_rows_per_unit=2,
        max_groups_per_unit=2,
        columns={name: ColumnPolicy(domain=values) for name, values in domains.items()},
    )
    return build_catalog({"visits": VISITS}, {"visits": policy}, schema=schema)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "SELECT department = 'A' AS k, COUNT(*) FROM visits GROUP BY k",
            {True: 1, False: 3},
        ),
        ("SELECT stay > 3 AS k, COUNT(*) FROM visits GROUP BY k", {True: 1, False: 2, None: 1}),
        (
            "SELECT department IN ('A', 'B') AS k, COUNT(*) FROM visits "
            "WHERE patient_id = 3 GROUP BY k",
            {False: 2},
        ),
    ],
)
def test_boolean_keys_count_every_row_on_both_engines(
    sql: str, expected: dict[object, int], pg_dsn: str, pg_schema: str
) -> None:
    create = "CREATE TABLE {}visits (patient_id BIGINT, department VARCHAR, stay INTEGER)"
    for dialect, schema in (("duckdb", "main"), ("postgres", pg_schema)):
        made = make_plan(sql, _catalog(schema), PlanRequest(1.0, dialect=dialect))
        if dialect == "duckdb":
            conn = duckdb.connect()
            conn.execute(create.format(""))
            conn.executemany("INSERT INTO visits VALUES (?, ?, ?)", ROWS)
            exact = conn.execute(in_key_order(made)).fetchall()
        else:
            with psycopg.connect(pg_dsn, autocommit=True) as pg:
                pg.execute(create.format(f'"{pg_schema}".'))
                with pg.cursor() as cur:
                    cur.executemany(f'INSERT INTO "{pg_schema}".visits VALUES (%s, %s, %s)', ROWS)
                exact = [tuple(r) for r in pg.execute(in_key_order(made)).fetchall()]
                pg.execute(f'DROP TABLE "{pg_schema}".visits')
        released = made.release(exact, ZeroNoise())
        counts = {row[0]: row[1] for row in released.rows if row[1]}
        assert counts == expected, dialect


@pytest.mark.parametrize(
    ("column", "values", "words"),
    [
        ("stay", ["1", "2"], "'1' is not a whole number"),
        ("stay", [True], "True is a boolean"),
        ("department", [1, 2], "1 is not a text"),
    ],
)
def test_domain_values_must_be_of_the_columns_type(
    column: str, values: list[str | int | float | bool], words: str
) -> None:
    with pytest.raises(PolicyError, match=words):
        _catalog("main", **{column: values})


def test_date_and_timestamp_domains_are_written_as_the_database_returns_them() -> None:
    kinds = {"pid": ColumnType.INTEGER, "d": ColumnType.DATE, "t": ColumnType.TIMESTAMP}

    def catalog(d: list[str | int | float | bool], t: list[str | int | float | bool]) -> None:
        columns = {"d": ColumnPolicy(domain=d), "t": ColumnPolicy(domain=t)}
        build_catalog(
            {"v": kinds}, {"v": TablePolicy(privacy_unit="pid", columns=columns)}, schema="main"
        )

    catalog(["2024-01-01"], ["2024-01-01T08:30:00"])
    with pytest.raises(PolicyError, match="is not written YYYY-MM-DD"):
        catalog(["2024-1-1"], ["2024-01-01T08:30:00"])
    with pytest.raises(PolicyError, match="is not written YYYY-MM-DDTHH:MM:SS"):
        catalog(["2024-01-01"], ["2024-01-01 08:30:00"])


POLICIES = {
    "visits": TablePolicy(
        privacy_unit="patient_id", columns={"department": ColumnPolicy(domain=["A", "B", "C"])}
    )
}


def test_a_case_insensitive_domain_column_is_refused_on_duckdb(tmp_path: Path) -> None:
    declared = _duckdb_schema(
        tmp_path, ["CREATE TABLE visits (patient_id BIGINT, department VARCHAR COLLATE NOCASE)"]
    )
    with pytest.raises(
        PolicyError, match='department] domain: the column has the collation "NOCASE"'
    ):
        check_domain_columns(declared, POLICIES)


@pytest.mark.parametrize(
    ("kind", "refused"),
    [("char(3)", "blank-padded"), ("varchar(3)", None), ('text COLLATE "C"', None)],
)
def test_postgres_domain_columns_compare_exactly(
    kind: str, refused: str | None, pg_dsn: str, pg_schema: str
) -> None:
    declared = _postgres_schema(
        pg_dsn, pg_schema, [f"CREATE TABLE visits (patient_id bigint, department {kind})"]
    )
    if refused is None:
        check_domain_columns(declared, POLICIES)
        return
    with pytest.raises(PolicyError, match=refused):
        check_domain_columns(declared, POLICIES)


def test_a_group_the_domain_does_not_hold_is_not_released_and_fails_nothing() -> None:
    made = make_plan(
        "SELECT department, COUNT(*) FROM visits GROUP BY department",
        _catalog("main", department=["A", "B"]),
        PlanRequest(1.0),
    )
    # As a NOCASE column would return it: 'a' passed the database's IN ('A', 'B').
    released = made.release([("A", 2), ("a", 1)], ZeroNoise())
    assert {row[0]: row[1] for row in released.rows} == {"A": 2, "B": 0}


def test_a_postgres_citext_domain_column_is_refused(pg_dsn: str, pg_schema: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE EXTENSION IF NOT EXISTS citext SCHEMA "{pg_schema}"')
    declared = _postgres_schema(
        pg_dsn,
        pg_schema,
        [f'CREATE TABLE visits (patient_id bigint, department "{pg_schema}".citext)'],
    )
    with pytest.raises(PolicyError, match="of type USER-DEFINED"):
        check_domain_columns(declared, POLICIES)
