"""The tables of the PostgreSQL state store: their DDL, its upgrades, and the check at open.

Apart from ``accountant.postgres`` (connections, transactions, owners) because the schema
is data of its own: the same tables, columns and SQL as the SQLite state file
(``accountant.sqlite``), created in a schema of their own on first use, upgraded in the
write transaction of the first open by a newer dpproxy, and refused with a message saying
what to do when the schema holds other tables or dpproxy tables of another version.
"""

from __future__ import annotations

from typing import Any, LiteralString

import psycopg
from psycopg import sql as pg_sql

from accountant.errors import StateStoreError
from accountant.sqlite import GENESIS_HASH, SCHEMA_VERSION

APPLICATION = "dpproxy"

#: The schema at version 3 (the SQLite file's version 3, which PostgreSQL started at).
BASE_VERSION = 3
_SCHEMA = f"""
CREATE TABLE schema_version (
    application TEXT NOT NULL CHECK (application = '{APPLICATION}'),
    version INTEGER NOT NULL
);
CREATE TABLE reservations (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    analyst TEXT NOT NULL,
    client_address TEXT NOT NULL,
    sql TEXT NOT NULL,
    started_at TEXT COLLATE "C" NOT NULL,
    reserved_at TEXT COLLATE "C" NOT NULL,
    epsilon_nano BIGINT NOT NULL CHECK (epsilon_nano >= 0),
    rho_nano BIGINT NOT NULL DEFAULT 0 CHECK (rho_nano >= 0),
    laplace_rho_nano BIGINT NOT NULL DEFAULT 0 CHECK (laplace_rho_nano >= 0),
    remaining_nano BIGINT NOT NULL CHECK (remaining_nano >= 0),
    owner TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('reserved', 'finished')),
    audit_id BIGINT,
    CHECK (epsilon_nano > 0 OR rho_nano > 0)
);
CREATE INDEX reservations_spent ON reservations (analyst, epsilon_nano, rho_nano);
CREATE INDEX reservations_open ON reservations (status) WHERE status = 'reserved';
CREATE INDEX reservations_time ON reservations (reserved_at);
CREATE TABLE analysts (
    name TEXT COLLATE "C" PRIMARY KEY,
    verifier TEXT NOT NULL,
    total_nano BIGINT NOT NULL CHECK (total_nano > 0),
    default_nano BIGINT NOT NULL CHECK (default_nano > 0),
    cap_nano BIGINT CHECK (cap_nano IS NULL OR cap_nano > 0),
    reset_after BIGINT NOT NULL DEFAULT 0,
    removed INTEGER NOT NULL DEFAULT 0 CHECK (removed IN (0, 1)),
    created_at TEXT COLLATE "C" NOT NULL,
    updated_at TEXT COLLATE "C" NOT NULL,
    delta TEXT NOT NULL DEFAULT '0.000001',
    mechanism TEXT NOT NULL DEFAULT 'laplace' CHECK (mechanism IN ('laplace', 'gaussian')),
    period TEXT NOT NULL DEFAULT 'never'
        CHECK (period IN ('never', 'daily', 'weekly', 'monthly'))
);
CREATE TABLE audit_log (
    id BIGINT PRIMARY KEY,
    time TEXT COLLATE "C" NOT NULL,
    started_at TEXT COLLATE "C" NOT NULL,
    analyst TEXT NOT NULL,
    client_address TEXT NOT NULL,
    sql TEXT NOT NULL,
    decision TEXT NOT NULL,
    reason TEXT,
    epsilon_nano BIGINT NOT NULL,
    remaining_nano BIGINT,
    row_count BIGINT,
    duration_ms DOUBLE PRECISION,
    reservation_id BIGINT,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    actor TEXT,
    rho_nano BIGINT
);
CREATE INDEX audit_log_time ON audit_log (time);
CREATE INDEX audit_log_analyst_time ON audit_log (analyst, time);
CREATE TABLE audit_head (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    last_id BIGINT NOT NULL,
    last_hash TEXT NOT NULL
);
INSERT INTO audit_head (singleton, last_id, last_hash) VALUES (1, 0, '{GENESIS_HASH}');
CREATE TABLE global_budget (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    total_nano BIGINT NOT NULL CHECK (total_nano > 0),
    delta TEXT NOT NULL
);
CREATE TABLE answer_cache_epoch (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    epoch BIGINT NOT NULL
);
INSERT INTO answer_cache_epoch (singleton, epoch) VALUES (1, 0);
CREATE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING MESSAGE = TG_ARGV[0], ERRCODE = 'restrict_violation';
END
$$;
CREATE TRIGGER reservations_no_delete BEFORE DELETE ON reservations
    FOR EACH ROW EXECUTE FUNCTION refuse_change('charges are never deleted');
CREATE TRIGGER reservations_no_truncate BEFORE TRUNCATE ON reservations
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_change('charges are never deleted');
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION refuse_change('the audit log is append-only');
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION refuse_change('the audit log is append-only');
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_change('the audit log is append-only');
INSERT INTO schema_version (application, version) VALUES ('{APPLICATION}', {BASE_VERSION});
"""

#: Upgrades from version ``n - 1`` to ``n`` (the same changes as the SQLite migrations),
#: applied in order inside the write transaction of the first open.
MIGRATIONS: dict[int, str] = {
    # Version 4: reservations may also charge δ (partition selection), ``delta_femto`` in
    # whole 10⁻¹⁵ units; audit records carry it (NULL when zero, hashed only when set).
    4: """
ALTER TABLE reservations ADD COLUMN delta_femto BIGINT NOT NULL DEFAULT 0
    CHECK (delta_femto >= 0);
ALTER TABLE audit_log ADD COLUMN delta_femto BIGINT;
""",
}


def prepare_schema(conn: psycopg.Connection[Any], schema: str, name: str) -> None:
    """Create ``schema`` and its tables if absent or empty; else check they are dpproxy's,
    of this version (upgrading older ones). Inside the write lock, so processes starting
    together create it once. ``name``: the state database, for messages."""
    exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
    if exists.fetchone() is None:  # (IF NOT EXISTS would still need CREATE on the database)
        conn.execute(pg_sql.SQL("CREATE SCHEMA {}").format(pg_sql.Identifier(schema)))
    (tables,) = _one(
        conn,
        "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')",
        schema,
    )
    if tables == 0:
        conn.execute(_SCHEMA)
        _migrate(conn, BASE_VERSION, name)
        return
    (marked,) = _one(
        conn,
        "SELECT count(*) FROM information_schema.columns WHERE table_schema = %s"
        " AND table_name = 'schema_version' AND column_name IN ('application', 'version')",
        schema,
    )
    version = None
    if marked == 2:
        (version,) = _one(
            conn, "SELECT max(version) FROM schema_version WHERE application = %s", APPLICATION
        )
    if version is None:
        raise StateStoreError(
            name,
            "this schema holds other tables, not a dpproxy state store",
            "set [state] schema to a new name (dpproxy creates it) or to dpproxy's own",
        )
    if BASE_VERSION <= version < SCHEMA_VERSION:
        _migrate(conn, version, name)
    elif version != SCHEMA_VERSION:
        newer = version > SCHEMA_VERSION
        raise StateStoreError(
            name,
            f"its schema version is {version}, this dpproxy understands {SCHEMA_VERSION}",
            "upgrade dpproxy" if newer else "restore the schema from a backup",
        )


def _migrate(conn: psycopg.Connection[Any], version: int, name: str) -> None:
    for target in range(version + 1, SCHEMA_VERSION + 1):
        if target not in MIGRATIONS:
            raise StateStoreError(
                name,
                f"this dpproxy cannot upgrade a PostgreSQL state store to version {target}",
                "report this as a bug in dpproxy",
            )
        conn.execute(MIGRATIONS[target])
        conn.execute("UPDATE schema_version SET version = %s", (target,))


def _one(conn: psycopg.Connection[Any], query: LiteralString, *params: Any) -> Any:
    """The row of an aggregate query (which always returns one)."""
    row = conn.execute(query, params).fetchone()
    return (None,) if row is None else row
