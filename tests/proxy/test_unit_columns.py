"""Columns that identify persons must compare exactly in the database: a review measured
one person's removal moving a count by twice its sensitivity when visits.patient_id
(BIGINT) was joined with patients.patient_id (DOUBLE: 2^53 + 1 = 2^53), when the unit
column was VARCHAR COLLATE NOCASE ('a' = 'A'), and on PostgreSQL when a varchar unit met
a char(5) one ('a ' = 'a')."""

from __future__ import annotations

import asyncio
from pathlib import Path

import duckdb
import psycopg
import pytest

from proxy.backends import SCHEMA_QUERY, Schema, column_types, group_declared
from proxy.backends.duckdb import DuckDBBackend
from proxy.unit_columns import check_unit_columns
from rewriter import ColumnType, PolicyError, TablePolicy, build_catalog

POLICIES = {
    "visits": TablePolicy(privacy_unit="patient_id", max_rows_per_unit=3),
    "patients": TablePolicy(privacy_unit="patient_id", max_rows_per_unit=1),
}


def _duckdb_schema(tmp_path: Path, ddl: list[str]) -> Schema:
    path = tmp_path / "data.duckdb"
    with duckdb.connect(str(path)) as conn:
        for statement in ddl:
            conn.execute(statement)
    backend = DuckDBBackend(path, timeout_seconds=5)
    try:
        return asyncio.run(backend.schema_declared("main"))
    finally:
        asyncio.run(backend.close())


def _postgres_schema(dsn: str, schema: str, ddl: list[str]) -> Schema:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in ddl:
            conn.execute(statement.replace("TABLE ", f'TABLE "{schema}".'))
        rows = conn.execute(SCHEMA_QUERY.format(placeholder="%s"), (schema,)).fetchall()
    return group_declared([tuple(r) for r in rows])


def test_a_case_insensitive_unit_column_is_refused_on_duckdb(tmp_path: Path) -> None:
    declared = _duckdb_schema(
        tmp_path,
        [
            "CREATE TABLE visits (patient_id VARCHAR COLLATE NOCASE, department VARCHAR)",
            "CREATE TABLE patients (patient_id VARCHAR, sex VARCHAR COLLATE NOCASE)",
        ],
    )
    assert declared["visits"]["patient_id"].collation == "NOCASE"
    assert declared["patients"]["sex"].collation == "NOCASE"
    assert declared["patients"]["patient_id"].collation is None
    with pytest.raises(PolicyError, match=r'"visits.patient_id" has the collation "NOCASE"'):
        check_unit_columns(declared, POLICIES)
    # A collation on another column is fine.
    check_unit_columns(declared, {"patients": POLICIES["patients"]})


def test_byte_wise_text_units_are_accepted_on_duckdb(tmp_path: Path) -> None:
    declared = _duckdb_schema(
        tmp_path,
        [
            "CREATE TABLE visits (patient_id VARCHAR, department VARCHAR)",
            'CREATE TABLE patients (patient_id VARCHAR COLLATE "binary")',
        ],
    )
    check_unit_columns(declared, POLICIES)


@pytest.mark.parametrize(
    ("visits", "patients", "refused"),
    [
        ("varchar(10)", "char(5)", "blank-padded"),
        ("text", 'text COLLATE "C"', None),
        ("text", "varchar", None),
        ("char(5)", "char(5)", None),
        ("text", 'text COLLATE "und-x-icu"', 'collation "und-x-icu"'),
    ],
)
def test_postgres_text_units_compare_exactly(
    visits: str, patients: str, refused: str | None, pg_dsn: str, pg_schema: str
) -> None:
    declared = _postgres_schema(
        pg_dsn,
        pg_schema,
        [
            f"CREATE TABLE visits (patient_id {visits}, department text)",
            f"CREATE TABLE patients (patient_id {patients})",
        ],
    )
    if refused is None:
        check_unit_columns(declared, POLICIES)
        return
    with pytest.raises(PolicyError, match=refused):
        check_unit_columns(declared, POLICIES)


def test_a_foreign_key_to_a_char_column_is_checked_too(pg_dsn: str, pg_schema: str) -> None:
    declared = _postgres_schema(
        pg_dsn,
        pg_schema,
        [
            "CREATE TABLE visits (patient_id char(5), visit_id varchar(8))",
            "CREATE TABLE patients (patient_id char(5))",
            "CREATE TABLE prescriptions (visit_id char(8), dose integer)",
        ],
    )
    policies = {
        **POLICIES,
        "prescriptions": TablePolicy(privacy_unit="visit_id -> visits.visit_id"),
    }
    with pytest.raises(PolicyError, match="blank-padded"):
        check_unit_columns(declared, policies)


@pytest.mark.parametrize("kind", [ColumnType.FLOAT, ColumnType.DECIMAL])
def test_floating_point_and_decimal_identifiers_are_refused(kind: ColumnType) -> None:
    with pytest.raises(PolicyError, match="must be an integer, text or uuid column"):
        build_catalog(
            {"visits": {"patient_id": ColumnType.INTEGER}, "patients": {"patient_id": kind}},
            POLICIES,
            schema="main",
        )
    with pytest.raises(PolicyError, match='column "patients.key"'):
        build_catalog(
            {
                "visits": {"patient_id": ColumnType.INTEGER},
                "patients": {"patient_id": ColumnType.INTEGER, "key": kind},
                "notes": {"key": ColumnType.INTEGER},
            },
            {**POLICIES, "notes": TablePolicy(privacy_unit="key -> patients.key")},
            schema="main",
        )


def test_the_schema_query_reads_collations() -> None:
    assert "collation_name" in SCHEMA_QUERY
    rows: list[tuple[object, ...]] = [("t", "a", "text", None, None, None, "C")]
    assert group_declared(rows)["t"]["a"].collation == "C"
    assert column_types(group_declared(rows)) == {"t": {"a": ColumnType.TEXT}}


def test_a_postgres_citext_unit_column_is_refused(pg_dsn: str, pg_schema: str) -> None:
    """citext is USER-DEFINED in information_schema: 'a' and 'A' are one person."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE EXTENSION IF NOT EXISTS citext SCHEMA "{pg_schema}"')
    declared = _postgres_schema(
        pg_dsn,
        pg_schema,
        [
            f'CREATE TABLE visits (patient_id "{pg_schema}".citext, department text)',
            "CREATE TABLE patients (patient_id uuid)",
        ],
    )
    assert declared["visits"]["patient_id"].name == "USER-DEFINED"
    with pytest.raises(PolicyError, match='"visits.patient_id" is of type USER-DEFINED'):
        check_unit_columns(declared, POLICIES)
    check_unit_columns(declared, {"patients": POLICIES["patients"]})  # uuid compares exactly
