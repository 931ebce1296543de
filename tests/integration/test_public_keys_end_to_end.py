"""A public table is joined only on a unique column, found when `dpproxy serve` starts, on
both engines: a lookup without one cannot be joined (the old rule took any equality with
another table: one of its rows then matched several, and how long the query ran, which
the noise does not protect, grew with them); one with a PRIMARY KEY answers as before."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import psycopg
import pytest

from proxy.demo_data import DemoSize, generate, load_postgres
from tests.integration.server import RunningServer, demo_database, start, write_config

PATIENTS = 50

LOOKUPS = [
    "CREATE TABLE wings (building VARCHAR PRIMARY KEY, wing VARCHAR)",
    "INSERT INTO wings VALUES ('Heart Center', 'north'), ('Main Building', 'south')",
    # Every column repeats a value: nothing to join it on.
    "CREATE TABLE floors (building VARCHAR, floor INTEGER)",
    "INSERT INTO floors VALUES ('Heart Center', 1), ('Heart Center', 2), ('Main Building', 1)",
    # Unique rows without a key: a key on DuckDB (whose file cannot change under dpproxy),
    # not on PostgreSQL (another session could add a row).
    "CREATE TABLE rooms (building VARCHAR, room VARCHAR)",
    "INSERT INTO rooms VALUES ('Heart Center', 'H1'), ('Main Building', 'M1')",
]
SECTIONS = "\n[tables.wings]\npublic = true\n\n[tables.floors]\npublic = true\n" + (
    "\n[tables.rooms]\npublic = true\n"
)
JOINED = (
    "SELECT COUNT(*) FROM visits v JOIN departments d ON d.department = v.department "
    "JOIN {table} x ON x.building = d.building"
)


@contextmanager
def lookup_server(
    engine: str, directory: Path, pg_dsn: str | None, max_public_rows: int | None = None
) -> Iterator[RunningServer]:
    """The demo with the LOOKUPS tables, served from DuckDB or from a PostgreSQL schema."""
    data = demo_database(directory, PATIENTS)
    backend, schema = "", f"dpproxy_it_{uuid.uuid4().hex[:10]}"
    if engine == "postgres":
        if pg_dsn is None:
            raise ValueError("the postgres engine needs a DSN")
        load_postgres(generate(DemoSize(patients=PATIENTS)), pg_dsn, schema=schema)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{schema}"'.encode())
            for statement in LOOKUPS:
                conn.execute(statement.encode())
        backend = f'engine = "postgres"\ndsn = "{pg_dsn}"\nschema = "{schema}"\n#'
    else:
        with duckdb.connect(str(data)) as conn:
            for statement in LOOKUPS:
                conn.execute(statement)
    config = write_config(directory, backend=backend)
    if max_public_rows is not None:
        limit = f"[backend]\nmax_public_rows = {max_public_rows}\n"
        config.write_text(config.read_text().replace("[backend]\n", limit, 1))
    with config.open("a") as file:
        file.write(SECTIONS)
    running = start(config)
    try:
        yield running
    finally:
        running.stop()
        if engine == "postgres" and pg_dsn is not None:
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())


def _count(conn: psycopg.Connection[tuple[object, ...]], sql: str) -> int:
    row = conn.execute(sql.encode()).fetchone()
    assert row is not None and isinstance(row[0], int)
    return row[0]


def _refused(conn: psycopg.Connection[tuple[object, ...]], sql: str) -> psycopg.Error:
    with pytest.raises(psycopg.errors.FeatureNotSupported) as refused:
        conn.execute(sql.encode())
    return refused.value


@pytest.mark.parametrize("engine", ["duckdb", "postgres"])
def test_a_lookup_joins_on_its_key_only(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    pg_dsn = request.getfixturevalue("pg_dsn") if engine == "postgres" else None
    with lookup_server(engine, tmp_path, pg_dsn) as server:
        with psycopg.connect(server.dsn("alice"), autocommit=True, connect_timeout=10) as conn:
            # The demo's departments (PRIMARY KEY (department)), as the docs join it.
            assert _count(conn, "SELECT COUNT(*) FROM visits JOIN departments USING (department)")
            assert _count(conn, JOINED.format(table="wings")) >= 0
            # No unique column: refused, saying why and what to do (answered before).
            refused = _refused(conn, JOINED.format(table="floors"))
            assert refused.diag.message_primary == (
                'public table "floors" has no column known to be unique, so it cannot be '
                "joined: a join on a column that repeats values can match each row with "
                "many of its rows"
            )
            assert refused.diag.message_hint is not None
            assert "ALTER TABLE floors ADD PRIMARY KEY (<column>)" in refused.diag.message_hint
            # A column of a keyed table that is not its key.
            refused = _refused(
                conn,
                "SELECT COUNT(*) FROM visits v JOIN departments d ON d.department = v.department "
                "JOIN departments e ON e.building = d.building",
            )
            assert refused.diag.message_primary is not None
            assert refused.diag.message_primary.startswith(
                'public table "departments" must be joined with an equality between one of its '
                "unique columns (department) and a column of another table"
            )
            if engine == "duckdb":
                assert _count(conn, JOINED.format(table="rooms")) >= 0
            else:
                refused = _refused(conn, JOINED.format(table="rooms"))
                assert refused.diag.message_primary is not None
                assert refused.diag.message_primary.startswith(
                    'public table "rooms" has no column known to be unique'
                )
        log = server.stop()
    assert "Traceback" not in log
    assert "public table floors has no column known to be unique" in log
    assert "public table wings may be joined on building" in log


@pytest.mark.parametrize("engine", ["duckdb", "postgres"])
def test_a_lookup_larger_than_max_public_rows_is_not_read(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Reading a large lookup table takes long enough to tell whether one person's row met
    a condition (tests/proxy/test_public_rows.py): above the limit, no query reads it."""
    pg_dsn = request.getfixturevalue("pg_dsn") if engine == "postgres" else None
    with lookup_server(engine, tmp_path, pg_dsn, max_public_rows=2) as server:
        with psycopg.connect(server.dsn("alice"), autocommit=True, connect_timeout=10) as conn:
            for sql in (
                "SELECT COUNT(*) FROM visits JOIN departments USING (department)",
                "SELECT COUNT(*) FROM visits WHERE department IN "
                "(SELECT department FROM departments WHERE floor > 1)",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege) as refused:
                    conn.execute(sql.encode())
                assert refused.value.diag.message_primary == (
                    'public table "departments" holds more than 2 rows, so queries cannot '
                    "read it: the time a query takes to read a large lookup table can tell "
                    "whether one person's row met a condition"
                )
                assert refused.value.diag.message_hint is not None
                assert "max_public_rows" in refused.value.diag.message_hint
            budget = conn.execute(b"SELECT * FROM dpproxy.my_budget").fetchone()
            assert budget is not None and float(str(budget[2])) == 0  # refused before any charge
            # Within the limit (2 rows): still read.
            assert (
                _count(
                    conn,
                    "SELECT COUNT(*) FROM visits WHERE department IN (SELECT building FROM wings)",
                )
                >= 0
            )
        psql = server.psql(
            "alice", "SELECT COUNT(*) FROM visits JOIN departments USING (department)"
        )
        assert psql.returncode != 0
        assert 'public table "departments" holds more than 2 rows' in psql.stderr
        log = server.stop()
    assert "Traceback" not in log
    assert "public table departments holds more than 2 rows, so queries cannot read it" in log
