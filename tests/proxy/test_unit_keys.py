"""A foreign-key path must reference a unique column: with visits.visit_id held by two
visits of two persons, a prescription of that visit counts for both, and removing one
person changes the other's contribution too. dpproxy refuses to start then, on both
engines, and on PostgreSQL also when nothing but today's rows keeps the column unique."""

from __future__ import annotations

import asyncio
from pathlib import Path

import duckdb
import psycopg
import pytest

from proxy.backends import Backend, KeyCheck
from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.postgres import PostgresBackend
from proxy.unit_keys import check_unit_keys
from rewriter import PolicyError, TablePolicy
from tests.integration.server import demo_database, dpproxy, write_config

POLICIES = {
    "visits": TablePolicy(privacy_unit="patient_id", max_rows_per_unit=3),
    "prescriptions": TablePolicy(privacy_unit="visit_id -> visits.visit_id"),
}
PRESCRIPTIONS = "CREATE TABLE prescriptions (visit_id INTEGER, dose INTEGER)"
PLAIN = "CREATE TABLE visits (patient_id INTEGER, visit_id INTEGER"


def _check(backend: Backend, schema: str) -> list[str]:
    async def run() -> list[str]:
        try:
            declared = await backend.schema_declared(schema)
            return await check_unit_keys(backend, schema, declared, POLICIES)
        finally:
            await backend.close()

    return asyncio.run(run())


def _duckdb(tmp_path: Path, visits: str, rows: str) -> DuckDBBackend:
    path = tmp_path / "data.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute(visits)
        conn.execute(PRESCRIPTIONS)
        conn.execute(f"INSERT INTO visits VALUES {rows}")
    return DuckDBBackend(path, timeout_seconds=5)


@pytest.mark.parametrize(
    ("visits", "rows", "outcome"),
    [
        ("CREATE TABLE visits (patient_id INTEGER, visit_id INTEGER PRIMARY KEY)", "(1, 7)", ""),
        ("CREATE TABLE visits (patient_id INTEGER, Visit_Id INTEGER UNIQUE)", "(1, 7)", ""),
        (PLAIN + ")", "(1, 7), (2, 8)", "note"),
        (
            PLAIN + ")",
            "(1, NULL), (2, NULL)",
            "note",
        ),
        (PLAIN + ")", "(1, 7), (2, 7)", "refused"),
        (
            PLAIN + ", UNIQUE (patient_id, visit_id))",
            "(1, 7), (2, 7)",
            "refused",
        ),
    ],
)
def test_duckdb_keys_are_declared_or_checked_in_the_rows(
    tmp_path: Path, visits: str, rows: str, outcome: str
) -> None:
    backend = _duckdb(tmp_path, visits, rows)
    if outcome == "refused":
        with pytest.raises(
            PolicyError, match=r"visits\.visit_id holds a value in more than one row"
        ):
            _check(backend, "main")
        return
    notes = _check(backend, "main")
    assert (notes != []) == (outcome == "note")
    if notes:
        assert "visits.visit_id (referenced by prescriptions) has no declared key" in notes[0]


@pytest.mark.parametrize(
    ("ddl", "accepted"),
    [
        (["CREATE TABLE visits (patient_id integer, visit_id integer PRIMARY KEY)"], True),
        (["CREATE TABLE visits (patient_id integer, visit_id integer UNIQUE)"], True),
        (
            [
                "CREATE TABLE visits (patient_id integer, visit_id integer)",
                "CREATE UNIQUE INDEX ON visits (visit_id)",
            ],
            True,
        ),
        # Unique rows prove nothing on PostgreSQL: other sessions may add a duplicate.
        (["CREATE TABLE visits (patient_id integer, visit_id integer)"], False),
        (
            [PLAIN + ", UNIQUE (patient_id, visit_id))"],
            False,
        ),
        (
            [
                "CREATE TABLE visits (patient_id integer, visit_id integer)",
                "CREATE UNIQUE INDEX ON visits (visit_id) WHERE patient_id > 0",
            ],
            False,
        ),
        (
            [
                "CREATE TABLE visits (patient_id integer, visit_id integer)",
                "CREATE UNIQUE INDEX ON visits ((visit_id + 0))",
            ],
            False,
        ),
        # A unique key of the same name in another schema does not count.
        (
            [
                "CREATE TABLE visits (patient_id integer, visit_id integer)",
                "CREATE TABLE public.visits_elsewhere (visit_id integer PRIMARY KEY)",
            ],
            False,
        ),
    ],
)
def test_postgres_keys_must_be_kept_unique_by_the_database(
    ddl: list[str], accepted: bool, pg_dsn: str, pg_schema: str
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{pg_schema}"')
        for statement in [*ddl, PRESCRIPTIONS]:
            conn.execute(statement)
        conn.execute("INSERT INTO visits VALUES (1, 7), (2, 8)")
        conn.execute("DROP TABLE IF EXISTS public.visits_elsewhere")
    backend = PostgresBackend(pg_dsn, pool_size=1, timeout_seconds=5)
    if accepted:
        assert _check(backend, pg_schema) == []
        return
    with pytest.raises(PolicyError, match=r"nothing keeps visits\.visit_id unique") as refused:
        _check(backend, pg_schema)
    assert "ALTER TABLE visits ADD UNIQUE (visit_id)" in str(refused.value)


def test_the_postgres_check_reads_the_catalog_only(pg_dsn: str, pg_schema: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE TABLE "{pg_schema}".visits (patient_id integer, visit_id integer)')
        conn.execute(f'INSERT INTO "{pg_schema}".visits VALUES (1, 7), (2, 7)')

    async def run() -> KeyCheck:
        backend = PostgresBackend(pg_dsn, pool_size=1, timeout_seconds=5)
        try:
            return await backend.key_check(pg_schema, "visits", "visit_id")
        finally:
            await backend.close()

    assert asyncio.run(run()) is KeyCheck.UNENFORCED


def test_dpproxy_serve_refuses_a_path_to_a_column_that_is_not_unique(tmp_path: Path) -> None:
    """As an admin sees it: `dpproxy serve` stops with the reason and what to do."""
    database = demo_database(tmp_path, patients=50)
    with duckdb.connect(str(database)) as conn:
        conn.execute("CREATE TABLE notes (department VARCHAR, words VARCHAR)")
    config = write_config(tmp_path, backend="")
    with config.open("a") as file:
        file.write('\n[tables.notes]\nprivacy_unit = "department -> visits.department"\n')
    result = dpproxy("serve", "--config", str(config))
    assert result.returncode != 0
    assert "visits.department holds a value in more than one row" in result.stderr
    assert "Traceback" not in result.stderr


def test_postgres_inheritance_children_are_not_covered_by_the_parents_key(
    pg_dsn: str, pg_schema: str
) -> None:
    """SELECT … FROM visits reads visits_archive's rows too, which the PRIMARY KEY of
    visits does not cover: visit 7 of two persons counted one prescription twice."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{pg_schema}"')
        conn.execute("CREATE TABLE visits (patient_id integer, visit_id integer PRIMARY KEY)")
        conn.execute("CREATE TABLE visits_archive () INHERITS (visits)")
        conn.execute(PRESCRIPTIONS)
        conn.execute("INSERT INTO visits VALUES (1, 7)")
        conn.execute("INSERT INTO visits_archive VALUES (2, 7)")
    backend = PostgresBackend(pg_dsn, pool_size=1, timeout_seconds=5)
    with pytest.raises(PolicyError, match=r"nothing keeps visits\.visit_id unique"):
        _check(backend, pg_schema)


def test_a_postgres_partitioned_tables_key_covers_its_partitions(
    pg_dsn: str, pg_schema: str
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{pg_schema}"')
        conn.execute(
            "CREATE TABLE visits (patient_id integer, visit_id integer PRIMARY KEY) "
            "PARTITION BY RANGE (visit_id)"
        )
        conn.execute("CREATE TABLE visits_low PARTITION OF visits FOR VALUES FROM (0) TO (100)")
        conn.execute(PRESCRIPTIONS)
    backend = PostgresBackend(pg_dsn, pool_size=1, timeout_seconds=5)
    assert _check(backend, pg_schema) == []
