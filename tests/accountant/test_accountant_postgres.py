"""What only the PostgreSQL state store has: its schema, session settings, owners held by
connections, reconnection, and its error messages. (The behaviour both backends share is
tested in the other test_accountant_* modules, against both.)"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from accountant import (
    RECOVERED_REASON,
    AnalystBudget,
    Attempt,
    Decision,
    Epsilon,
    PostgresState,
    StateStore,
    StateStoreError,
)
from accountant.postgres_schema import _SCHEMA, BASE_VERSION, MIGRATIONS
from accountant.sqlite import SCHEMA_VERSION
from tests.accountant.backends import query, raw, write_lock_held

BUDGET = AnalystBudget(total=Epsilon(1), default_per_query=Epsilon("0.1"))


def attempt(sql_text: str = "SELECT count(*) FROM visits") -> Attempt:
    return Attempt("alice", "10.0.0.7:51234", sql_text)


@pytest.fixture
def state(pg_dsn: str, pg_schema: str) -> PostgresState:
    return PostgresState(pg_dsn, pg_schema)


def backend_pid(store: StateStore) -> int:
    with store._db.transaction(write=False) as conn:
        return int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])


def test_schema_is_created_in_its_own_namespace(state: PostgresState, pg_dsn: str) -> None:
    StateStore.open(state).close()
    tables = query(
        state,
        "SELECT table_schema, table_name FROM information_schema.tables"
        f" WHERE table_schema = '{state.schema}' ORDER BY table_name",
    )
    assert {name for _, name in tables} == {
        "analysts",
        "answer_cache_epoch",
        "audit_head",
        "audit_log",
        "global_budget",
        "reservations",
        "schema_version",
    }
    assert query(state, "SELECT application, version FROM schema_version") == [
        ("dpproxy", SCHEMA_VERSION)
    ]
    with psycopg.connect(pg_dsn) as conn:  # nothing landed in public
        public = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
            " AND table_name IN ('reservations', 'audit_log')"
        ).fetchone()
    assert public == (0,)


def test_tables_and_columns_match_the_sqlite_file(state: PostgresState, tmp_path: Path) -> None:
    """The same SQL runs on both: a schema change in one (a new migration in
    accountant.sqlite) must be mirrored in the other (accountant.postgres_schema.MIGRATIONS)."""
    assert set(MIGRATIONS) == set(range(BASE_VERSION + 1, SCHEMA_VERSION + 1))
    file = tmp_path / "state.db"
    StateStore.open(file).close()
    StateStore.open(state).close()
    in_file: dict[str, set[str]] = {}
    for (table,) in query(file, "SELECT name FROM sqlite_master WHERE type = 'table'"):
        if not table.startswith("sqlite_"):
            in_file[table] = {row[1] for row in query(file, f"PRAGMA table_info({table})")}
    in_postgres: dict[str, set[str]] = {}
    for table, column in query(
        state,
        "SELECT table_name, column_name FROM information_schema.columns"
        f" WHERE table_schema = '{state.schema}'",
    ):
        in_postgres.setdefault(table, set()).add(column)
    in_postgres["schema_version"].discard("application")  # SQLite marks files otherwise
    assert in_postgres == in_file


def test_a_missing_schema_is_created(pg_dsn: str) -> None:
    state = PostgresState(pg_dsn, "dpproxy_test_created_here")
    try:
        with StateStore.open(state) as store:
            store.reserve(attempt(), Epsilon("0.1"), BUDGET)
        with StateStore.open(state) as again:
            assert again.spent("alice") == Epsilon("0.1")
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS dpproxy_test_created_here CASCADE")


def test_sessions_commit_synchronously_whatever_the_server_default(state: PostgresState) -> None:
    relaxed = PostgresState(
        state.dsn + "?options=-c%20synchronous_commit%3Doff", schema=state.schema
    )
    with StateStore.open(relaxed) as store, store._db.transaction(write=True) as conn:
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
        assert conn.execute("SHOW transaction_isolation").fetchone() == ("read committed",)
    with StateStore.open(relaxed) as store, store._db.transaction(write=False) as conn:
        assert conn.execute("SHOW transaction_isolation").fetchone() == ("repeatable read",)
        assert conn.execute("SHOW transaction_read_only").fetchone() == ("on",)


def test_a_killed_connection_is_a_dead_owner_and_the_store_reconnects(
    state: PostgresState,
) -> None:
    """A proxy whose connection (or process) dies loses its owner lock: another store
    recovers its open reservations. The killed store reconnects on its next request."""
    with StateStore.open(state) as doomed, StateStore.open(state) as survivor:
        doomed.reserve(attempt("SELECT 'lost'"), Epsilon("0.2"), BUDGET)
        assert survivor.recover_interrupted() == 0  # its owner is alive
        with raw(state) as admin:
            # Wait (up to 5 s) until the backend has exited and released its locks: without
            # a timeout pg_terminate_backend only sends the signal (a race, seen once in CI).
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", (backend_pid(doomed),))
        assert survivor.recover_interrupted() == 1
        (record,) = survivor.audit_records()
        assert (record.decision, record.reason) == (Decision.FAILED, RECOVERED_REASON)
        assert record.epsilon == Epsilon("0.2")
        with pytest.raises(StateStoreError, match="connection to PostgreSQL failed"):
            doomed.spent("alice")
        assert doomed.spent("alice") == Epsilon("0.2")  # reconnected
        own = doomed.reserve(attempt(), Epsilon("0.1"), BUDGET)
        assert survivor.recover_interrupted() == 0  # the owner lock is held again
        doomed.complete(own, decision="accepted", reason=None, rows=1, duration_ms=1)
        assert survivor.verify_audit().intact


def test_schemas_are_independent(pg_dsn: str, pg_schema: str) -> None:
    other = PostgresState(pg_dsn, pg_schema + "_other")
    state = PostgresState(pg_dsn, pg_schema)
    try:
        with (
            StateStore.open(state, timeout=0.2) as first,
            StateStore.open(other, timeout=0.2) as second,
        ):
            with write_lock_held(state):
                second.reserve(attempt(), Epsilon("0.5"), BUDGET)  # not blocked
                with pytest.raises(StateStoreError, match="locked"):
                    first.reserve(attempt(), Epsilon("0.5"), BUDGET)
            assert first.spent("alice") == Epsilon.zero()
            assert second.spent("alice") == Epsilon("0.5")
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(other.schema))
            )


def test_version_3_schema_is_upgraded(state: PostgresState) -> None:
    with raw(state) as conn:
        conn.execute(_SCHEMA)
        conn.execute(
            "INSERT INTO reservations (analyst, client_address, sql, started_at, reserved_at,"
            " epsilon_nano, laplace_rho_nano, remaining_nano, owner, status) VALUES ('alice',"
            " 'a', 'SELECT 1', '2026-01-01T00:00:00.000000+00:00',"
            " '2026-01-01T00:00:00.000000+00:00', 1000000000, 500000000, 0, '1', 'finished')"
        )
    assert query(state, "SELECT version FROM schema_version") == [(BASE_VERSION,)]
    with StateStore.open(state) as store:
        assert store.spent("alice") == Epsilon(1)
        assert store.verify_audit().intact
    assert query(state, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]


def test_a_schema_of_something_else_is_refused(state: PostgresState) -> None:
    with raw(state) as conn:
        conn.execute("CREATE TABLE invoices (id int)")
    with pytest.raises(StateStoreError, match="not a dpproxy state store") as info:
        StateStore.open(state)
    assert f"(schema {state.schema})" in str(info.value)
    assert "set [state] schema to a new name" in str(info.value)
    assert query(state, "SELECT count(*) FROM invoices") == [(0,)]  # left alone


def test_an_older_unknown_version_is_refused(state: PostgresState) -> None:
    StateStore.open(state).close()
    with raw(state) as conn:
        conn.execute("UPDATE schema_version SET version = 2")
    with pytest.raises(StateStoreError, match="version is 2.*restore the schema from a backup"):
        StateStore.open(state)


def test_unreachable_server_is_named_without_the_password() -> None:
    state = PostgresState("postgresql://ledger:sekret@127.0.0.1:1/accounts", "dpproxy")
    with pytest.raises(StateStoreError) as info:
        StateStore.open(state, timeout=2)
    message = str(info.value)
    assert message.startswith(
        "dpproxy state database postgresql://ledger@127.0.0.1:1/accounts (schema dpproxy): "
        "the connection to PostgreSQL failed"
    )
    assert "check that the server is running" in message
    assert "sekret" not in message and "sekret" not in repr(state)


@pytest.mark.parametrize(
    ("dsn", "schema", "problem"),
    [
        ("host=db user=x", "dpproxy", "must be a PostgreSQL URL"),
        ("mysql://db/x", "dpproxy", "must be a PostgreSQL URL"),
        ("postgresql://db/x?nonsense=1", "dpproxy", "not a valid PostgreSQL URL"),
        ("postgresql://db/x", "Budget", "not a usable schema name"),
        ("postgresql://db/x", "pg_temp", "not a usable schema name"),
        ("postgresql://db/x", 'x"; DROP', "not a usable schema name"),
    ],
)
def test_location_is_validated(dsn: str, schema: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        PostgresState(dsn, schema)
